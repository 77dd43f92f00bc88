//go:build !race

package gateway

// raceEnabled: see race_on_test.go.
const raceEnabled = false
