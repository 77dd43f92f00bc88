package parley_test

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"parley"
)

// docs/protocol.md is the clients' reference: its ops, close-code table and
// event catalogue must be the registry's, both ways.

func readProtocolDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// docSection returns the text from the heading line start up to the next
// heading of the same level.
func docSection(t *testing.T, doc, heading string) string {
	t.Helper()
	i := strings.Index(doc, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("docs/protocol.md has no %q", heading)
	}
	rest := doc[i+len(heading)+2:]
	level := heading[:strings.IndexByte(heading, ' ')+1] // "## "
	if j := strings.Index(rest, "\n"+level); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

func TestProtocolDocOps(t *testing.T) {
	doc := readProtocolDoc(t)
	opHeading := regexp.MustCompile("(?m)^### `([a-z_]+)`$")
	for _, tc := range []struct {
		heading string
		want    []string
	}{
		{"## Server → client", parley.ServerOps},
		{"## Client → server", parley.ClientOps},
	} {
		var got []string
		for _, m := range opHeading.FindAllStringSubmatch(docSection(t, doc, tc.heading), -1) {
			got = append(got, m[1])
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: the doc has ops %v, the registry %v", tc.heading, got, tc.want)
		}
	}
}

func TestProtocolDocCloseCodes(t *testing.T) {
	sec := docSection(t, readProtocolDoc(t), "## Close codes")
	row := regexp.MustCompile(`(?m)^\| (\d{4}) \| ([^|]*) \| ([^|]*) \| ([^|]*) \|$`)
	var codes []int
	for _, m := range row.FindAllStringSubmatch(sec, -1) {
		code, _ := strconv.Atoi(m[1])
		codes = append(codes, code)
		c, ok := parley.LookupCloseCode(code)
		if !ok {
			t.Errorf("the doc lists close code %d, the registry does not", code)
			continue
		}
		resumable := strings.Trim(strings.TrimSpace(m[3]), "*")
		switch {
		case strings.HasPrefix(resumable, "yes") && !c.Resumable,
			strings.HasPrefix(resumable, "no") && c.Resumable:
			t.Errorf("%d: the doc says resumable %q, the registry %v", code, m[3], c.Resumable)
		}
		what := strings.ToLower(m[4])
		if fatal := strings.Contains(what, "give up") || strings.HasPrefix(what, "stop"); fatal != c.Fatal {
			t.Errorf("%d: the doc says the client does %q, the registry says fatal %v", code, m[4], c.Fatal)
		}
	}
	var want []int
	for _, c := range parley.CloseCodes {
		want = append(want, c.Code)
	}
	if !slices.Equal(codes, want) {
		t.Errorf("the doc's close codes %v, the registry's %v", codes, want)
	}
}

// TestProtocolDocEvents holds the event catalogue to the registry: every
// type clients may see is described (or listed as reserved), under a
// heading that names its kind, and marked reserved exactly when the
// registry says nobody emits it.
func TestProtocolDocEvents(t *testing.T) {
	cat := docSection(t, readProtocolDoc(t), "## Event catalogue")
	bold := regexp.MustCompile("\\*\\*`([a-z_.]+)`\\*\\*")
	code := regexp.MustCompile("`([a-z_]+(?:\\.[a-z_]+)?)`")
	type entry struct {
		kind     string // from the heading: durable, bus-only, ephemeral; "" if none
		reserved bool
	}
	got := map[string]entry{}
	for _, sub := range strings.Split(cat, "\n### ")[1:] {
		heading, body, _ := strings.Cut(sub, "\n")
		kind := ""
		for _, k := range []string{"durable", "bus-only", "ephemeral"} {
			if strings.Contains(heading, "("+k) {
				kind = k
			}
		}
		if heading == "Reserved types" {
			// The first paragraph lists the reserved types.
			para, _, _ := strings.Cut(strings.TrimSpace(body), "\n\n")
			for _, m := range code.FindAllStringSubmatch(para, -1) {
				if _, ok := parley.LookupEventType(m[1]); ok {
					got[m[1]] = entry{reserved: true}
				}
			}
			continue
		}
		for _, para := range strings.Split(body, "\n\n") {
			for _, m := range bold.FindAllStringSubmatch(para, -1) {
				got[m[1]] = entry{kind: kind, reserved: strings.Contains(para, "reserved")}
			}
		}
	}
	kindName := map[parley.EventKind]string{parley.EventDurable: "durable", parley.EventBusOnly: "bus-only", parley.EventEphemeral: "ephemeral"}
	for _, et := range parley.EventTypes {
		e, ok := got[et.Type]
		delete(got, et.Type)
		if et.Kind == parley.EventInternal {
			if ok {
				t.Errorf("%s is internal but the catalogue describes it", et.Type)
			}
			continue
		}
		switch {
		case !ok:
			t.Errorf("%s is not in the catalogue", et.Type)
		case e.reserved != et.Reserved:
			t.Errorf("%s: the catalogue says reserved %v, the registry %v", et.Type, e.reserved, et.Reserved)
		case e.kind != "" && e.kind != kindName[et.Kind]:
			t.Errorf("%s: the catalogue says %s, the registry %s", et.Type, e.kind, kindName[et.Kind])
		case e.kind == "" && !et.Reserved:
			t.Errorf("%s: described under no heading that names its kind", et.Type)
		}
	}
	for typ := range got {
		t.Errorf("the catalogue describes %s, which the registry does not list", typ)
	}
}

// TestProtocolDocAudience: the "Who receives what" tables are the
// registry's audiences, both ways: every audience explained once, every
// event type listed once with its audience, "(reserved)" exactly for the
// reserved ones.
func TestProtocolDocAudience(t *testing.T) {
	sec := docSection(t, readProtocolDoc(t), "## Who receives what")
	audRow := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| ([^|]{30,})\\|$") // an explanation, not a type's row
	explained := map[string]bool{}
	for _, m := range audRow.FindAllStringSubmatch(sec, -1) {
		explained[m[1]] = true
	}
	for a := parley.AudienceChannel; a <= parley.AudienceServers; a++ {
		if !explained[a.String()] {
			t.Errorf("audience %s is not explained", a)
		}
		delete(explained, a.String())
	}
	for a := range explained {
		t.Errorf("the doc explains audience %s, the registry has none", a)
	}

	typeRow := regexp.MustCompile("(?m)^\\| `([a-z_.]+)` \\| `([a-z_]+)`( \\(reserved\\))? \\|$")
	rows := map[string][]string{}
	for _, m := range typeRow.FindAllStringSubmatch(sec, -1) {
		if _, dup := rows[m[1]]; dup {
			t.Errorf("%s listed twice", m[1])
		}
		rows[m[1]] = m[2:]
	}
	for _, et := range parley.EventTypes {
		r, ok := rows[et.Type]
		delete(rows, et.Type)
		switch {
		case !ok:
			t.Errorf("%s has no row", et.Type)
		case r[0] != et.Audience.String():
			t.Errorf("%s: the doc says %s, the registry %s", et.Type, r[0], et.Audience)
		case (r[1] != "") != et.Reserved:
			t.Errorf("%s: the doc says reserved %v, the registry %v", et.Type, r[1] != "", et.Reserved)
		}
	}
	for typ := range rows {
		t.Errorf("the doc lists %s, the registry does not", typ)
	}
}
