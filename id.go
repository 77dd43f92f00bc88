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
