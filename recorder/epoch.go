package recorder

import (
	"bytes"
	"crypto/rand"
)

// NewEpoch returns a random epoch: EpochLength characters of lower-case base32 (40 bits).
func NewEpoch() string {
	var b [EpochLength]byte
	rand.Read(b[:]) // never fails (crypto/rand documents it panics instead)
	for i := range b {
		b[i] = epochAlphabet[b[i]&31]
	}
	return string(b[:])
}

// FrameEpoch returns the epoch of the event id a stored frame ends with, "" when it ends with
// none. Every frame the proxy records ends with its id line ("id: <runId>:<epoch>:<seq>", see
// sse.Frame.AppendWithID and sse.AppendEvent), written in the run's epoch at the time. A
// reader that read a run's metadata and then its events checks that the events carry the
// metadata's epoch (OtherEpoch): a run compacted at rest in between (RunCompactor) has new
// events, numbered anew, under a new epoch.
func FrameEpoch(frame []byte) string { return string(frameEpoch(frame)) }

// OtherEpoch reports whether frame ends with an event id of an epoch other than epoch (a frame
// with no id is not). It does not allocate.
func OtherEpoch(frame []byte, epoch string) bool {
	e := frameEpoch(frame)
	return e != nil && string(e) != epoch
}

func frameEpoch(frame []byte) []byte {
	if len(frame) < 2 || frame[len(frame)-1] != '\n' || frame[len(frame)-2] != '\n' {
		return nil
	}
	line := frame[:len(frame)-2]
	line = line[bytes.LastIndexByte(line, '\n')+1:]
	if !bytes.HasPrefix(line, []byte("id:")) {
		return nil
	}
	id := line[3:]
	if len(id) > 0 && id[0] == ' ' {
		id = id[1:]
	}
	// "<runId>:<epoch>:<seq>": the epoch is the field before the last colon.
	i := bytes.LastIndexByte(id, ':')
	if i < EpochLength+1 || id[i-EpochLength-1] != ':' {
		return nil
	}
	epoch := id[i-EpochLength : i]
	for _, c := range epoch {
		if !validEpochByte(c) {
			return nil
		}
	}
	return epoch
}
