// Package problem writes RFC 9457 problem documents, the body of every error the proxy and
// its attach endpoints answer before a stream starts.
package problem

import (
	"encoding/json"
	"net/http"
)

// Problem is an RFC 9457 problem document. Code is a stable machine-readable name
// (RunAlreadyStarted, ThreadRoomMismatch, ...); Type is derived from it.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	Code   string `json:"code"`
}

// New returns the problem for status and code.
func New(status int, code, title, detail string) Problem {
	return Problem{Type: "urn:agui-proxy:problem:" + code, Title: title, Status: status, Detail: detail, Code: code}
}

// Write answers p as application/problem+json. Only before the response started.
func Write(w http.ResponseWriter, p Problem) {
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	h.Del("Content-Length")
	if p.Status == http.StatusServiceUnavailable {
		h.Set("Retry-After", "1")
	}
	w.WriteHeader(p.Status)
	body, _ := json.Marshal(p)
	w.Write(append(body, '\n'))
}
