package recorder

import (
	"context"
	_ "embed" // Lua script
	"errors"
)

// ErrConflict is returned by ReplaceRunEvents when the run changed meanwhile: its epoch is not
// the expected one (another replica compacted it, or the run id was re-created) or it is
// running.
var ErrConflict = errors.New("run changed meanwhile")

// RunCompactor is implemented by stores that can replace an ended run's raw events by their
// compacted form (compaction at rest, AGUI_COMPACT_AFTER). Every store of this package
// implements it.
type RunCompactor interface {
	// ReplaceRunEvents atomically replaces the events of an ended run whose epoch is
	// prevEpoch by events (their Seq is ignored: they are stored as 1..n, and their frames
	// should carry cursors of the new epoch), sets the run's epoch to epoch, clears its gaps
	// and sets CompactedAt. A reader sees the raw events or the compacted ones, never a mix or
	// neither; a cursor of the old epoch no longer matches, so a resume from inside the run
	// answers the full history. The checkpoint is left alone (the state is the same).
	// Errors: ErrConflict, ErrRunNotFound, ErrThreadNotFound, ErrInvalidEpoch.
	ReplaceRunEvents(ctx context.Context, threadID, runID, prevEpoch, epoch string, events []Event) error
}

var (
	_ RunCompactor = (*MemoryStore)(nil)
	_ RunCompactor = (*DiskStore)(nil)
	_ RunCompactor = (*RedisStore)(nil)
)
