package main

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"

	"github.com/caarlos0/env/v11"
)

// envErrors rewrites the env library's parse errors so that each names the variable
// (AGUI_MAX_RUN_DURATION) instead of the Go field (MaxRunDuration).
func envErrors(err error) error {
	var agg env.AggregateError
	if !errors.As(err, &agg) {
		return err
	}
	t := reflect.TypeFor[config]()
	out := make([]error, 0, len(agg.Errors))
	for _, e := range agg.Errors {
		var pe env.ParseError
		if errors.As(e, &pe) {
			if f, ok := t.FieldByName(pe.Name); ok {
				e = fmt.Errorf("%s: %w", f.Tag.Get("env"), pe.Err)
			}
		}
		out = append(out, e)
	}
	return errors.Join(out...)
}

// unknownVars returns a warning for every AGUI_* variable of environ (nil: the process
// environment) that configures nothing, naming the closest known variable.
func unknownVars(environ map[string]string) []string {
	if environ == nil {
		environ = map[string]string{}
		for _, kv := range os.Environ() {
			k, v, _ := strings.Cut(kv, "=")
			environ[k] = v
		}
	}
	known := map[string]bool{}
	for _, v := range configVars() {
		known[v.Name] = true
	}
	var names []string
	for k := range environ {
		if strings.HasPrefix(k, "AGUI_") && !known[k] {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	var out []string
	for _, k := range names {
		best, bestD := "", -1
		for _, v := range configVars() {
			if d := editDistance(k, v.Name); bestD < 0 || d < bestD {
				best, bestD = v.Name, d
			}
		}
		out = append(out, fmt.Sprintf("%s is not a setting of agui-proxy and is ignored (did you mean %s?)", k, best))
	}
	return out
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
