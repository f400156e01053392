package engine

import (
	"strconv"

	"github.com/ibcm/ibcm/cm/clock"
)

// CommID is a local or remote communication ID (12.6.1). 0 means none.
type CommID uint32

func (id CommID) String() string { return "0x" + strconv.FormatUint(uint64(id), 16) }

// Time is the caller's monotonic time (clock.Time): the Engine never reads a
// clock, every input carries the current Time.
type Time = clock.Time

// Never is the deadline of "no timer".
const Never = clock.Never
