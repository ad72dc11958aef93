package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stderr))
}

// run parses the command line, probes once and returns the exit code: 0 healthy, 1 unhealthy,
// 2 bad usage.
func run(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("agui-healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	statuses := fs.String("status", "200", "comma-separated accepted status codes")
	timeout := fs.Duration("timeout", 3*time.Second, "time allowed for the whole request")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: agui-healthcheck [-status 200,204] [-timeout 3s] URL")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	accept, err := parseStatuses(*statuses)
	if err != nil {
		fmt.Fprintf(stderr, "agui-healthcheck: %v\n", err)
		return 2
	}
	u, err := url.Parse(fs.Arg(0))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		fmt.Fprintf(stderr, "agui-healthcheck: %q is not an http(s) URL\n", fs.Arg(0))
		return 2
	}
	if *timeout <= 0 {
		fmt.Fprintf(stderr, "agui-healthcheck: -timeout %v must be positive\n", *timeout)
		return 2
	}
	if err := probe(ctx, u.String(), accept, *timeout); err != nil {
		fmt.Fprintf(stderr, "agui-healthcheck: %v\n", err)
		return 1
	}
	return 0
}

// parseStatuses reads a comma-separated list of HTTP status codes.
func parseStatuses(s string) (map[int]bool, error) {
	out := make(map[int]bool)
	for f := range strings.SplitSeq(s, ",") {
		code, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || code < 100 || code > 599 {
			return nil, fmt.Errorf("-status %q: %q is not an HTTP status code", s, f)
		}
		out[code] = true
	}
	return out, nil
}

// probe sends one GET and reports an error unless the answer's status is accepted.
func probe(ctx context.Context, target string, accept map[int]bool, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", "agui-healthcheck")
	client := &http.Client{
		// A redirect is an answer of its own: a health endpoint that redirects is misconfigured.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 4<<10))
	if !accept[res.StatusCode] {
		return fmt.Errorf("GET %s = %d %q", target, res.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
}
