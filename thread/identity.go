package thread

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/agui-proxy/agui-proxy/internal/problem"
)

// maxIdentityBytes bounds the identity value stored as a thread's owner.
const maxIdentityBytes = 256

// Identify returns the caller's identity ("" when anonymous or single-tenant) and removes from
// r every header that could be mistaken for the identity header.
//
// Security invariant (CVE-2026-30851 class): the identity comes only from the configured header,
// spelled exactly, sent once, and — when TrustedProxies is set — from a trusted peer. Look-alike
// names that normalise to the same header ("X_Agui_User", "x-agui_user") are deleted before
// the request is forwarded, so neither we nor the agent can read a client-forged variant.
func (s *Service) Identify(r *http.Request) (string, error) {
	name := s.cfg.IdentityHeader
	if name == "" {
		return "", nil
	}
	want := normalizeHeaderName(name)
	for k := range r.Header {
		if k != name && normalizeHeaderName(k) == want {
			delete(r.Header, k)
		}
	}
	if len(s.cfg.TrustedProxies) > 0 && !s.trustedPeer(r.RemoteAddr) {
		delete(r.Header, name)
		return "", nil
	}
	values := r.Header[name]
	switch {
	case len(values) == 0:
		return "", nil
	case len(values) > 1:
		return "", fmt.Errorf("%w: %s sent more than once", problem.ErrInvalidIdentity, name)
	}
	v := strings.TrimSpace(values[0])
	if v == "" || len(v) > maxIdentityBytes || strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "", fmt.Errorf("%w: %s has an empty, oversized or non-printable value", problem.ErrInvalidIdentity, name)
	}
	return v, nil
}

// normalizeHeaderName folds case and treats '_' like '-', the spellings intermediaries and
// frameworks (CGI, WSGI) confuse.
func normalizeHeaderName(k string) string {
	return strings.ReplaceAll(strings.ToLower(k), "_", "-")
}

func (s *Service) trustedPeer(remoteAddr string) bool {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	addr = addr.Unmap()
	for _, p := range s.cfg.TrustedProxies {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}
