// Package sse is the Server-Sent Events wire codec of agui-proxy: a Reader
// that splits an upstream event stream into frames while it passes through
// the proxy, and encoders (AppendEvent, AppendComment, Writer) for the frames
// the proxy writes itself.
//
// # Reading
//
// Reader follows the "event stream interpretation" of the WHATWG HTML
// standard: lines end with LF, CRLF or a lone CR (also when a CRLF is split
// between two reads); one leading U+FEFF BOM is skipped (a second one becomes
// part of the first field name, which is then unknown); lines starting with
// ':' are comments; "name:value" loses one space after the colon; a line
// without a colon is a field with an empty value; unknown fields are ignored;
// retry must be ASCII digits; an id containing NUL is ignored; a blank line
// ends the frame. Bytes are not decoded: values are the input bytes (a browser
// would replace invalid UTF-8 with U+FFFD; CR, LF, NUL and the BOM never occur
// inside a multi-byte sequence, so framing is the same).
//
// Every input byte belongs to exactly one Frame.Raw, in order: each extra
// blank line is a frame of its own with no fields, a final frame cut by EOF is
// returned with Terminated false, and the concatenation of all Raw is the
// input. The proxy forwards Raw (through Frame.AppendWithID, which adds its
// own id) and records the parsed fields.
//
// Next returns a frame as soon as its blank line has been read and never
// waits for more input, so every event can be flushed at once. The one price:
// when a frame ends with a CR that is the last byte of a read, an LF that
// follows in the next read cannot be known to belong to that line ending; it
// is carried over as the first byte of the next frame's Raw and skipped by the
// parser. Only how Raw is split into frames depends on read boundaries then;
// the fields of every frame, and the concatenation of Raw, do not.
//
// # Differences from the official AG-UI client
//
// The @ag-ui/client parser is not WHATWG: it splits the stream on "\n\n"
// only (a CRLF- or CR-framed stream makes the whole run fail), reads only
// data lines, ignores id, event, retry and comments, and dispatches an
// unterminated last frame at EOF. That is why everything this package writes
// uses LF framing only, why adding an id line is harmless to that client, and
// why Reader returns an unterminated final frame (a browser would drop it; the
// caller decides, with Frame.Terminated).
//
// # Limits
//
// A Reader reads into a 512-byte buffer held in the Reader itself while what
// it buffers fits; a larger frame moves it to a 4 KiB buffer from a pool shared
// by every Reader (given back as soon as the Reader handed out what it holds,
// so an idle Reader holds none), grown further only as a frame needs and
// shrunk back after a run of small frames. It never holds more than
// Limits.MaxFrameBytes plus a few bytes,
// whatever the input: a line over MaxLineBytes or a frame over MaxFrameBytes
// is reported as a *LimitError as soon as the buffered bytes prove it,
// without reading the rest. Frames of normal size cost no allocation in
// steady state: Raw and a single-line Data alias the buffer, a multi-line
// Data reuses a scratch buffer, and event names or ids equal to the previous
// ones reuse the same string.
//
// # Concurrency
//
// A Reader or a Writer is not safe for concurrent use; the frame returned by
// Next is valid only until the next call. AppendEvent, AppendComment and
// Frame.AppendWithID are pure functions.
package sse
