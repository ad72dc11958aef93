package main

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestRun: the exit code follows the answer's status, the flags and the URL's validity.
func TestRun(t *testing.T) {
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "not ready: shutting down", http.StatusServiceUnavailable)
	})
	mux.HandleFunc("/agent", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "POST a RunAgentInput", http.StatusMethodNotAllowed)
	})
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/healthz", http.StatusFound) })
	mux.HandleFunc("/hang", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })

	tests := []struct {
		name    string
		args    []string
		want    int
		wantErr string // substring of stderr; empty: stderr must be empty
	}{
		{"healthy", []string{srv.URL + "/healthz"}, 0, ""},
		{"unready", []string{srv.URL + "/readyz"}, 1, "= 503"},
		{"405 not accepted by default", []string{srv.URL + "/agent"}, 1, "= 405"},
		{"405 accepted", []string{"-status", "405", srv.URL + "/agent"}, 0, ""},
		{"one of several", []string{"-status", "204, 405", srv.URL + "/agent"}, 0, ""},
		{"redirect not followed", []string{srv.URL + "/moved"}, 1, "= 302"},
		{"timeout", []string{"-timeout", "50ms", srv.URL + "/hang"}, 1, "deadline exceeded"},
		{"refused", []string{"http://" + refusingAddr(t) + "/healthz"}, 1, "refused"},
		{"no URL", nil, 2, "Usage"},
		{"two URLs", []string{srv.URL, srv.URL}, 2, "Usage"},
		{"not http", []string{"ftp://example.invalid/"}, 2, "not an http(s) URL"},
		{"bad status", []string{"-status", "ok", srv.URL}, 2, "not an HTTP status code"},
		{"zero timeout", []string{"-timeout", "0s", srv.URL}, 2, "must be positive"},
		{"unknown flag", []string{"-x", srv.URL}, 2, "-x"},
		{"help", []string{"-h"}, 0, "Usage"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			got := run(t.Context(), tt.args, &stderr)
			if got != tt.want {
				t.Errorf("run(%q) = %d, want %d; stderr: %s", tt.args, got, tt.want, stderr.String())
			}
			if tt.wantErr == "" && stderr.Len() != 0 {
				t.Errorf("run(%q) stderr = %q, want empty", tt.args, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.wantErr) {
				t.Errorf("run(%q) stderr = %q, want it to contain %q", tt.args, stderr.String(), tt.wantErr)
			}
		})
	}
}

// refusingAddr returns a loopback address nothing listens on: it binds a port and closes it.
func refusingAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestParseStatuses(t *testing.T) {
	tests := []struct {
		in   string
		want []int // nil: an error
	}{
		{"200", []int{200}},
		{"200,204", []int{200, 204}},
		{" 405 , 200", []int{200, 405}},
		{"100,599", []int{100, 599}},
		{"", nil},
		{"99", nil},
		{"600", nil},
		{"200,", nil},
		{"2xx", nil},
	}
	for _, tt := range tests {
		got, err := parseStatuses(tt.in)
		if tt.want == nil {
			if err == nil {
				t.Errorf("parseStatuses(%q) = %v, want an error", tt.in, got)
			}
			continue
		}
		if err != nil || !slices.Equal(sortedKeys(got), tt.want) {
			t.Errorf("parseStatuses(%q) = %v, %v, want %v", tt.in, sortedKeys(got), err, tt.want)
		}
	}
}

// FuzzParseStatuses: parseStatuses never panics, accepts only codes 100-599, and its result
// printed back as a list parses to the same set.
func FuzzParseStatuses(f *testing.F) {
	for _, s := range []string{"200", "200,204", " 405 , 200", "", ",", "-1", "+200", "0200", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseStatuses(s)
		if err != nil {
			return
		}
		var parts []string
		for _, code := range sortedKeys(got) {
			if code < 100 || code > 599 {
				t.Fatalf("parseStatuses(%q) accepted %d", s, code)
			}
			parts = append(parts, strconv.Itoa(code))
		}
		again, err := parseStatuses(strings.Join(parts, ","))
		if err != nil || !slices.Equal(sortedKeys(again), sortedKeys(got)) {
			t.Fatalf("parseStatuses(%q) = %v, reparsed = %v, %v", s, sortedKeys(got), sortedKeys(again), err)
		}
	})
}

func sortedKeys(m map[int]bool) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
