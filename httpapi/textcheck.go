package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"parley"
)

// Every string a client sends is checked here, once, before any handler
// sees it: NUL and invalid UTF-8 are 400 naming the field. PostgreSQL's text
// refuses both (an internal error there) while SQLite would store them, so
// the one rule has to sit in front of both stores; doing it in the body
// decoder and for the query string means a new endpoint cannot forget it.
// Paths are checked in wrap (a path holding such bytes names nothing: 404).

// checkJSONText reports the first string in a JSON document, object keys
// included, that holds NUL or was not valid UTF-8 (or UTF-16: a lone
// surrogate escape), named by its JSON path. encoding/json would quietly
// turn invalid sequences into U+FFFD, so the raw bytes are inspected. The
// walk runs only when a cheap scan finds something suspect, so well-formed
// bodies pay one pass over their bytes.
func checkJSONText(body []byte) error {
	if utf8.Valid(body) && !suspectEscape(body) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	var stack []jsonFrame
	var prev int64
	for {
		tok, err := dec.Token()
		if err != nil {
			// Malformed JSON: the real decode reports it.
			return nil
		}
		end := dec.InputOffset()
		raw := body[prev:end]
		prev = end
		isKey := len(stack) > 0 && stack[len(stack)-1].object && stack[len(stack)-1].wantKey
		if s, ok := tok.(string); ok {
			if why := badText(s, raw); why != "" {
				field := jsonPath(stack, !isKey)
				switch {
				case isKey && field == "":
					return parley.Errorf(parley.EINVALID, "a key of the request body %s", why)
				case isKey:
					return parley.Errorf(parley.EINVALID, "a key of %s %s", field, why)
				case field == "":
					return parley.Errorf(parley.EINVALID, "the request body %s", why)
				}
				return parley.Errorf(parley.EINVALID, "%s %s", field, why)
			}
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if len(stack) > 0 {
				stack[len(stack)-1].valueSeen()
			}
			stack = append(stack, jsonFrame{object: tok == json.Delim('{'), wantKey: true, index: -1})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			continue
		}
		if len(stack) == 0 {
			continue
		}
		top := &stack[len(stack)-1]
		if isKey {
			top.key, top.wantKey = tok.(string), false
			continue
		}
		top.valueSeen()
	}
}

// jsonFrame is one open object or array during checkJSONText's walk.
type jsonFrame struct {
	object  bool
	wantKey bool   // object: the next string token is a key
	key     string // object: the key whose value is being read
	index   int    // array: the index of the last value seen
}

// valueSeen records that a value (scalar or container) was read in f.
func (f *jsonFrame) valueSeen() {
	if f.object {
		f.wantKey = true
	} else {
		f.index++
	}
}

// jsonPath names the position of the walk as a dotted path such as
// "channels.C123" or "ids[2]"; with value set, the array frame on top names
// the element about to be read.
func jsonPath(stack []jsonFrame, value bool) string {
	var b strings.Builder
	for i, f := range stack {
		switch {
		case f.object && (!f.wantKey || (i < len(stack)-1)):
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(f.key)
		case !f.object:
			n := f.index
			if value && i == len(stack)-1 {
				n++ // the element being read now
			}
			b.WriteString("[" + strconv.Itoa(n) + "]")
		}
	}
	return b.String()
}

// badText says what is wrong with a decoded string s whose raw JSON token
// (with surrounding punctuation) is raw, or "" when nothing is.
func badText(s string, raw []byte) string {
	if strings.IndexByte(s, 0) >= 0 {
		return "must not contain NUL characters"
	}
	if !utf8.Valid(raw) || bytes.Count([]byte(s), replacement) > countReplacements(raw) {
		return "must be valid UTF-8"
	}
	return ""
}

var replacement = []byte("\uFFFD")

// countReplacements counts the U+FFFD a raw token holds honestly: literal
// or escaped as \ufffd. Any more in the decoded string were substituted for
// invalid input.
func countReplacements(raw []byte) int {
	n := bytes.Count(raw, replacement)
	for i := 0; i+6 <= len(raw); i++ {
		if raw[i] == '\\' && raw[i+1] == 'u' && strings.EqualFold(string(raw[i+2:i+6]), "fffd") {
			n++
		}
	}
	return n
}

// suspectEscape reports whether body holds a \u escape of NUL or of a
// surrogate: the only ways valid UTF-8 JSON can decode to a bad string. A
// false alarm (an escaped backslash before "u0000") only costs the walk.
func suspectEscape(body []byte) bool {
	for {
		i := bytes.Index(body, []byte(`\u`))
		if i < 0 || i+6 > len(body) {
			return false
		}
		h := body[i+2 : i+6]
		if string(h) == "0000" || ((h[0] == 'd' || h[0] == 'D') && strings.IndexByte("89abcdefABCDEF", h[1]) >= 0) {
			return true
		}
		body = body[i+2:]
	}
}

// checkQuery reports the first query parameter, name or value, that holds
// NUL or invalid UTF-8.
func checkQuery(r *http.Request) error {
	if r.URL.RawQuery == "" {
		return nil
	}
	for name, vals := range r.URL.Query() {
		if strings.IndexByte(name, 0) >= 0 || !utf8.ValidString(name) {
			return parley.Errorf(parley.EINVALID, "query parameter names must be valid UTF-8 without NUL characters")
		}
		for _, v := range vals {
			if err := parley.CheckText("query parameter "+name, v); err != nil {
				return err
			}
		}
	}
	return nil
}
