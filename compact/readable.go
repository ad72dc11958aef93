package compact

import (
	"errors"
	"strconv"

	"github.com/agui-proxy/agui-proxy/agui"
)

// OmittedEventName is the name of the CUSTOM event Readable adds where it left events out.
const OmittedEventName = "agui-proxy.events_omitted"

// maxOmitOneByOne bounds how many rejected events Readable removes one at a time (each
// removal re-runs Compact); past it, everything from the next rejected event on is left out
// at once, so a thread full of bad events costs a bounded number of passes.
const maxOmitOneByOne = 64

// Readable compacts events like Compact, and when the official client would reject the
// stream (an orphan TEXT_MESSAGE_CONTENT, an event after the run's terminal event, an
// imported document holding either, a gap after the store lost data), it leaves out each
// event the client rejects and says so: the result then holds a CUSTOM event named
// OmittedEventName whose value is {"omitted": <count>, "reason": <the first rejection>},
// placed before the last run's terminal event (or last, when the run is still going). A
// thread therefore stays readable whatever bad events it holds: the result always replays
// (Replay) without error, starts with RUN_STARTED when the input has one, and holds every
// event the client accepts, folded as Compact folds it. omitted is the number of input
// events left out (0 when Compact accepted the stream as it is).
//
// Input past one of Options' limits is returned as a *LimitError, as Compact does.
func Readable(events []Event, opts Options) (out []Event, omitted int, err error) {
	cur := events
	var reason string
	for pass := 0; ; pass++ {
		out, err = Compact(cur, opts)
		var se *StreamError
		if err == nil || !errors.As(err, &se) || se.Index < 0 || se.Index >= len(cur) {
			break
		}
		if reason == "" {
			reason = se.Error()
		}
		if pass == 0 {
			cur = append([]Event(nil), events...) // never modify the caller's slice
		}
		if pass < maxOmitOneByOne {
			cur = append(cur[:se.Index], cur[se.Index+1:]...)
			omitted++
		} else {
			omitted += len(cur) - se.Index
			cur = cur[:se.Index]
		}
	}
	if err != nil || omitted == 0 {
		return out, omitted, err
	}
	marker := Event{Type: agui.KindCustom.String(), Raw: []byte(`{"type":"CUSTOM","name":"` + OmittedEventName +
		`","value":{"omitted":` + strconv.Itoa(omitted) + `,"reason":` + strconv.Quote(asciiOnly(reason)) + `}}`)}
	at := len(out)
	if at > 0 {
		if k := agui.KindOf(out[at-1].Type); k == agui.KindRunFinished || k == agui.KindRunError {
			at--
		}
	}
	withMarker := make([]Event, 0, len(out)+1)
	withMarker = append(append(append(withMarker, out[:at]...), marker), out[at:]...)
	if _, _, rerr := Replay(withMarker); rerr == nil {
		out = withMarker
	}
	return out, omitted, nil
}

// asciiOnly keeps s printable ASCII, so that strconv.Quote yields a JSON string.
func asciiOnly(s string) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 0x20 && c < 0x7f {
			b = append(b, c)
		} else {
			b = append(b, '?')
		}
	}
	return string(b)
}
