// Package parley holds Parley's domain: the types every other package speaks
// (users, workspaces, channels, messages, events), the error codes that the
// HTTP API and the gateway map to statuses, the input validation rules, and
// the service interfaces that storage backends implement.
//
// It must not import any other package of this module, nor any database,
// bus or transport library: those live in their own packages (sqlstore,
// natsbus, httpapi) and only cmd/parley wires them together.
package parley

// Version is the build version; cmd/parley overrides it with -ldflags.
var Version = "dev"

// Paging limits shared by every list endpoint.
const (
	DefaultLimit = 50
	MaxLimit     = 200
)

// ClampLimit applies the paging defaults: 0 or less means DefaultLimit and
// anything above MaxLimit is MaxLimit.
func ClampLimit(n int) int {
	switch {
	case n <= 0:
		return DefaultLimit
	case n > MaxLimit:
		return MaxLimit
	}
	return n
}
