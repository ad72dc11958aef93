package main

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
)

// envErrors rewrites the env library's parse errors so that each names the variable
// (AGUI_MAX_RUN_DURATION, not the Go field MaxRunDuration), the value it has and the form
// expected, without Go's parser internals (strconv.ParseInt: parsing "10MB": invalid syntax).
// environ is where the values came from (nil: the process environment).
func envErrors(err error, environ map[string]string) error {
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
				name := f.Tag.Get("env")
				v, _ := lookupEnv(environ, name)
				e = fmt.Errorf("%s=%q: %s", name, v, expectedForm(name, f.Type))
			}
		}
		out = append(out, e)
	}
	return errors.Join(out...)
}

// expectedForm says what a variable of type t takes, with an example.
func expectedForm(name string, t reflect.Type) string {
	switch {
	case t == reflect.TypeFor[time.Duration]():
		return "want a duration such as 500ms, 30s, 5m or 1h (a number alone is not one, except 0)"
	case t.Kind() == reflect.Bool:
		return "want true or false"
	case strings.HasSuffix(name, "_BYTES") || name == "AGUI_GC_HEAP_FLOOR" || name == "AGUI_CHECKPOINT_MEMORY":
		return "want a whole number of bytes such as 10485760 for 10 MiB (units like MB are not read)"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		return "want a whole number such as 16"
	}
	return "want a " + t.String()
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
		out = append(out, k+" is not a setting of agui-proxy and is ignored"+unknownHint(k, environ[k]))
	}
	return out
}

// meantFor maps the words of settings people expect (a port, a host, a Redis address, a data
// directory) to the variable that does it, where no spelling of theirs is close to its name.
var meantFor = map[string]string{
	"PORT": "AGUI_LISTEN", "HOST": "AGUI_LISTEN", "ADDR": "AGUI_LISTEN", "ADDRESS": "AGUI_LISTEN",
	"BIND": "AGUI_LISTEN", "LISTEN_ADDR": "AGUI_LISTEN", "LISTEN_ADDRESS": "AGUI_LISTEN", "HTTP_ADDR": "AGUI_LISTEN",
	"AGENT": "AGUI_UPSTREAM", "AGENT_URL": "AGUI_UPSTREAM", "TARGET": "AGUI_UPSTREAM", "BACKEND": "AGUI_UPSTREAM",
	"UPSTREAM_URL": "AGUI_UPSTREAM", "URL": "AGUI_UPSTREAM",
	"REDIS": "AGUI_REDIS_URL", "REDIS_ADDR": "AGUI_REDIS_URL", "REDIS_HOST": "AGUI_REDIS_URL", "REDIS_ADDRESS": "AGUI_REDIS_URL",
	"DATA_DIR": "AGUI_STORE_PATH", "DB_PATH": "AGUI_STORE_PATH", "STORE": "AGUI_STORE_PATH", "STORE_DIR": "AGUI_STORE_PATH",
	"DIR": "AGUI_STORE_PATH", "PATH": "AGUI_STORE_PATH", "DEBUG": "AGUI_LOG_LEVEL", "LOG": "AGUI_LOG_LEVEL",
}

// unknownHint says what an unknown AGUI_* variable (with value v) was likely meant to be:
// the setting that does what its name says (AGUI_PORT: AGUI_LISTEN, with the value in the
// form it takes), else the known name within a typo's distance, else where the list is.
func unknownHint(k, v string) string {
	if to, ok := meantFor[strings.TrimPrefix(k, "AGUI_")]; ok {
		switch {
		case to == "AGUI_LISTEN" && isPort(v):
			return fmt.Sprintf(" (the port is part of AGUI_LISTEN: set AGUI_LISTEN=127.0.0.1:%s, or :%s for every interface)", v, v)
		case to == "AGUI_LISTEN":
			return " (the address is set by AGUI_LISTEN=host:port, such as 127.0.0.1:8080)"
		case to == "AGUI_UPSTREAM" && v != "" && !strings.Contains(v, "://"):
			return fmt.Sprintf(" (the agent is set by AGUI_UPSTREAM=http://%s)", v)
		}
		return fmt.Sprintf(" (did you mean %s?)", to)
	}
	names := make([]string, 0, len(configVars()))
	for _, c := range configVars() {
		names = append(names, c.Name)
	}
	if hint := didYouMean(k, names); hint != "" {
		return hint
	}
	return " (agui-proxy -h lists the settings)"
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
