package parley

import (
	"crypto/rand"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

// ID prefixes say what an id names, which helps when reading logs; clients
// must treat ids as opaque.
const (
	PrefixOrg       = "O"
	PrefixWorkspace = "W"
	PrefixUser      = "U"
	PrefixChannel   = "C"
	PrefixDM        = "D"
	PrefixMessage   = "M"
)

var (
	idMu      sync.Mutex // guards idEntropy
	idEntropy = ulid.Monotonic(rand.Reader, 0)
)

// NewID returns a new time-ordered identifier with the given prefix.
func NewID(prefix string) string {
	idMu.Lock()
	id := ulid.MustNew(ulid.Timestamp(time.Now()), idEntropy)
	idMu.Unlock()
	return prefix + id.String()
}

// NewIDAt returns an identifier with the given prefix whose time part is t
// (imported history: ids keep the time order of the messages they name,
// which search's newest-first walk over message ids relies on).
func NewIDAt(prefix string, t time.Time) string {
	idMu.Lock()
	id := ulid.MustNew(ulid.Timestamp(t), idEntropy)
	idMu.Unlock()
	return prefix + id.String()
}
