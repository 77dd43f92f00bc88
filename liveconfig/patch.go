package liveconfig

import "parley"

// The setters the per-feature patches (patch_*.go) share.

// setBool sets *to when from is given.
func setBool(from *bool, to *bool) {
	if from != nil {
		*to = *from
	}
}

// setInt sets *to when from is given and within [lo, hi], else EINVALID
// naming the key.
func setInt(key string, from *int, to *int, lo, hi int) error {
	if from == nil {
		return nil
	}
	if *from < lo || *from > hi {
		return parley.Errorf(parley.EINVALID, "%s must be %d to %d", key, lo, hi)
	}
	*to = *from
	return nil
}

// intKey is one integer key of a patch: its name, the value given (nil:
// not given), the field it sets and its range.
type intKey struct {
	key    string
	from   *int
	to     *int
	lo, hi int
}

// setInts sets each given key (setInt), stopping at the first out of
// range.
func setInts(keys []intKey) error {
	for _, k := range keys {
		if err := setInt(k.key, k.from, k.to, k.lo, k.hi); err != nil {
			return err
		}
	}
	return nil
}
