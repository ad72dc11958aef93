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
	out, omitted, _, err = ReadableFold(events, opts)
	return out, omitted, err
}

// ReadableFold is Readable that also returns, when no event was left out, the Fold whose
// Events are out: a caller that keeps it can Feed it the events that follow (the next run of
// the thread) instead of compacting the thread again. fold is nil when events were left out
// or on error.
func ReadableFold(events []Event, opts Options) (out []Event, omitted int, fold *Fold, err error) {
	cur := events
	var reason string
	for pass := 0; ; pass++ {
		fold = NewFold(opts)
		if err = fold.Feed(cur); err == nil {
			out, err = fold.Events()
		}
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
	if err != nil {
		return nil, omitted, nil, err
	}
	if omitted == 0 {
		return out, 0, fold, nil
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
	return out, omitted, nil, nil
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
