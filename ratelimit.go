package parley

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Rate is a token-bucket limit: PerMinute tokens a minute, at most Burst at
// once. The zero Rate means "the default" (whoever holds the setting
// decides which); a negative PerMinute means no limit.
//
// Its text form, used by flags and the live configuration, is
// "120/min,burst=60", "120/min" (the burst is then one minute's worth),
// "off" (no limit) or "default" (the zero Rate).
type Rate struct {
	PerMinute float64
	Burst     int
}

// RateOff is the Rate that never limits.
var RateOff = Rate{PerMinute: -1}

// IsDefault reports whether r is the zero Rate, "use the default".
func (r Rate) IsDefault() bool { return r == Rate{} }

// Off reports whether r is no limit at all.
func (r Rate) Off() bool { return r.PerMinute < 0 }

// Or returns r, or d when r is the default.
func (r Rate) Or(d Rate) Rate {
	if r.IsDefault() {
		return d
	}
	return r
}

// maxRate bounds both numbers of a Rate: a million a minute is far above
// anything a limit is for, and keeps the arithmetic of a bucket exact.
const maxRate = 1_000_000

// ParseRate reads the text form of a Rate; anything else is EINVALID.
func ParseRate(s string) (Rate, error) {
	s = strings.TrimSpace(strings.ToLower(s))
	switch s {
	case "default", "":
		return Rate{}, nil
	case "off":
		return RateOff, nil
	}
	bad := func() (Rate, error) {
		return Rate{}, Errorf(EINVALID, `rate %q: want "N/min", "N/min,burst=B", "off" or "default"`, s)
	}
	num, burst, hasBurst := strings.Cut(s, ",")
	num, ok := strings.CutSuffix(strings.TrimSpace(num), "/min")
	if !ok {
		return bad()
	}
	per, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || math.IsNaN(per) || per <= 0 || per > maxRate {
		return bad()
	}
	r := Rate{PerMinute: per, Burst: max(1, int(math.Ceil(per)))}
	if hasBurst {
		b, ok := strings.CutPrefix(strings.TrimSpace(burst), "burst=")
		if !ok {
			return bad()
		}
		n, err := strconv.Atoi(b)
		if err != nil || n < 1 || n > maxRate {
			return bad()
		}
		r.Burst = n
	}
	return r, nil
}

// MustRate is ParseRate for constants; it panics on a bad text.
func MustRate(s string) Rate {
	r, err := ParseRate(s)
	if err != nil {
		panic(err)
	}
	return r
}

// String is the text form ParseRate reads.
func (r Rate) String() string {
	switch {
	case r.IsDefault():
		return "default"
	case r.Off():
		return "off"
	}
	return fmt.Sprintf("%s/min,burst=%d", strconv.FormatFloat(r.PerMinute, 'f', -1, 64), r.Burst)
}

// MarshalText writes the text form (JSON strings in the live configuration).
func (r Rate) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText reads the text form.
func (r *Rate) UnmarshalText(b []byte) error {
	v, err := ParseRate(string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// LiveRates are the API's rate limits as the live configuration holds
// them (docs/security.md lists each). A field left at the default (the zero
// Rate, "default" in JSON) is the node's own default: its --rate-* flag, or
// the compiled value. Storing "default" rather than a number keeps a later
// flag change effective.
type LiveRates struct {
	MessageUser    Rate `json:"rate_message_user"`
	MessageIP      Rate `json:"rate_message_ip"`
	WriteUser      Rate `json:"rate_write_user"`
	WriteIP        Rate `json:"rate_write_ip"`
	CreateUser     Rate `json:"rate_create_user"`
	CreateIP       Rate `json:"rate_create_ip"`
	SearchUser     Rate `json:"rate_search_user"`
	SearchIP       Rate `json:"rate_search_ip"`
	LoginAccountIP Rate `json:"rate_login_account_ip"`
	LoginAccount   Rate `json:"rate_login_account"`
	LoginIP        Rate `json:"rate_login_ip"`
	SignupIP       Rate `json:"rate_signup_ip"`
}

// Or returns r with each default field taken from d.
func (r LiveRates) Or(d LiveRates) LiveRates {
	df := d.fields()
	for i, p := range r.fields() {
		*p = p.Or(*df[i])
	}
	return r
}

// fields lists pointers to every field, in declaration order.
func (r *LiveRates) fields() []*Rate {
	return []*Rate{
		&r.MessageUser, &r.MessageIP, &r.WriteUser, &r.WriteIP,
		&r.CreateUser, &r.CreateIP, &r.SearchUser, &r.SearchIP,
		&r.LoginAccountIP, &r.LoginAccount, &r.LoginIP, &r.SignupIP,
	}
}

// LiveRatesOff is every limit off: for tests and tools that drive the API
// harder than any person.
func LiveRatesOff() LiveRates {
	var r LiveRates
	for _, p := range r.fields() {
		*p = RateOff
	}
	return r
}
