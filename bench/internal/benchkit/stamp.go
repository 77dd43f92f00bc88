package benchkit

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A stamp starts the text of every benchmark message: "<prefix>|<index>|<unix ns>|",
// padded with "x" to the message size, so that every receiver can tell
// which message it got and how long after its sending.

// Stamp is message idx's text, sent now, padded to size bytes.
func Stamp(prefix string, idx, size int) string { return StampAt(prefix, idx, time.Now(), size) }

// StampAt is message idx's text stamped with at: an open-loop publisher
// stamps the time the message was due, so that a receiver's latency
// includes any wait before it was sent.
func StampAt(prefix string, idx int, at time.Time, size int) string {
	s := fmt.Sprintf("%s|%d|%d|", prefix, idx, at.UnixNano())
	if len(s) < size {
		s += strings.Repeat("x", size-len(s))
	}
	return s
}

// ParseStamp finds prefix's stamp in a payload.
func ParseStamp(prefix []byte, d []byte) (idx int, sent int64, ok bool) {
	i := bytes.Index(d, prefix)
	if i < 0 || len(d) <= i+len(prefix) || d[i+len(prefix)] != '|' {
		return 0, 0, false
	}
	rest := d[i+len(prefix)+1:]
	a := bytes.IndexByte(rest, '|')
	if a < 0 {
		return 0, 0, false
	}
	n, err := strconv.Atoi(string(rest[:a]))
	if err != nil {
		return 0, 0, false
	}
	rest = rest[a+1:]
	b := bytes.IndexByte(rest, '|')
	if b < 0 {
		return 0, 0, false
	}
	t, err := strconv.ParseInt(string(rest[:b]), 10, 64)
	if err != nil {
		return 0, 0, false
	}
	return n, t, true
}

// Percentile returns the p-th percentile of ns samples, in milliseconds.
func Percentile(ns []int64, p float64) float64 {
	if len(ns) == 0 {
		return 0
	}
	s := slices.Clone(ns)
	slices.Sort(s)
	i := int(float64(len(s)-1) * p / 100)
	return float64(s[i]) / 1e6
}
