package parley_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"parley"
)

var updateProtocol = flag.Bool("update", false, "rewrite "+protocolJSONPath+" from the registry")

// protocolJSONPath is the registry as the TypeScript client's tests read it.
const protocolJSONPath = "web/client/src/protocol.gen.json"

func TestEventTypesRegistry(t *testing.T) {
	seen := map[string]bool{}
	for _, et := range parley.EventTypes {
		if seen[et.Type] {
			t.Errorf("%s listed twice", et.Type)
		}
		seen[et.Type] = true
		if et.Kind < parley.EventDurable || et.Kind > parley.EventInternal {
			t.Errorf("%s: kind %d", et.Type, et.Kind)
		}
		if et.Kind == parley.EventInternal && et.Reserved {
			t.Errorf("%s: an internal type is never reserved for clients", et.Type)
		}
		got, ok := parley.LookupEventType(et.Type)
		if !ok || got.Type != et.Type || got.Kind != et.Kind {
			t.Errorf("LookupEventType(%q) = %+v, %v", et.Type, got, ok)
		}
		if parley.IsEphemeralEvent(et.Type) != (et.Kind == parley.EventEphemeral) {
			t.Errorf("IsEphemeralEvent(%q) disagrees with its kind %v", et.Type, et.Kind)
		}
		// Every type has one audience (ARCHITECTURE §4); only the
		// internal ones stay with the servers.
		if et.Audience < parley.AudienceChannel || et.Audience > parley.AudienceServers {
			t.Errorf("%s: no audience (%d)", et.Type, et.Audience)
		}
		if (et.Kind == parley.EventInternal) != (et.Audience == parley.AudienceServers) {
			t.Errorf("%s: kind %v with audience %v: internal types, and only they, go to the servers only", et.Type, et.Kind, et.Audience)
		}
		if et.Kind == parley.EventDurable && et.Audience != parley.AudienceChannel && et.Audience != parley.AudienceChannelAndUser {
			t.Errorf("%s: a channel log's event goes to the channel's audience, not %v", et.Type, et.Audience)
		}
	}
	if _, ok := parley.LookupEventType("no.such"); ok {
		t.Error("LookupEventType found an unknown type")
	}
	// Every directory event is a known type: the query caches act on them.
	for _, et := range parley.EventTypes {
		if parley.IsDirectoryEvent(et.Type) && et.Kind == parley.EventEphemeral {
			t.Errorf("%s: a directory event must not be droppable", et.Type)
		}
	}
}

func TestCloseCodesTable(t *testing.T) {
	names := map[string]bool{}
	for i, c := range parley.CloseCodes {
		if i > 0 && c.Code <= parley.CloseCodes[i-1].Code {
			t.Errorf("%d out of order", c.Code)
		}
		if names[c.Name] || c.Name == "" {
			t.Errorf("%d: name %q missing or taken", c.Code, c.Name)
		}
		names[c.Name] = true
		if c.Fatal && c.Resumable {
			t.Errorf("%d: fatal and resumable", c.Code)
		}
		if parley.CloseResumable(c.Code) != c.Resumable || parley.CloseFatal(c.Code) != c.Fatal {
			t.Errorf("%d: lookups disagree with the table", c.Code)
		}
	}
	// A code nobody knows: the client tries to resume and does not give up.
	if !parley.CloseResumable(4999) || parley.CloseFatal(4999) {
		t.Error("an unknown code must be resumable and not fatal")
	}
	for _, tc := range []struct {
		err  error
		want int
	}{
		{parley.Errorf(parley.EUNAUTHORIZED, "bad token"), parley.CloseAuthFailed},
		{parley.Errorf(parley.ENOTFOUND, "no such workspace"), parley.CloseAuthFailed},
		{parley.Errorf(parley.EFORBIDDEN, "not a member"), parley.CloseAuthFailed},
		{parley.Errorf(parley.EINVALID, "bad workspace id"), parley.CloseAuthFailed},
		{parley.Errorf(parley.EUNAVAILABLE, "shedding"), parley.CloseUnknownError},
		{errors.New("disk on fire"), parley.CloseUnknownError},
	} {
		if got := parley.CloseCodeFor(tc.err); got != tc.want {
			t.Errorf("CloseCodeFor(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestBroadcastMentions(t *testing.T) {
	for _, h := range parley.BroadcastMentions {
		if !parley.IsBroadcastMention(h) {
			t.Errorf("%s is not a broadcast mention", h)
		}
		if got := parley.Mentions("hi @" + h + "!"); !slices.Equal(got, []string{h}) {
			t.Errorf("Mentions does not find @%s: %v", h, got)
		}
	}
	if parley.IsBroadcastMention("alice") {
		t.Error("alice is a user")
	}
}

func TestTopicKinds(t *testing.T) {
	for _, tc := range []struct {
		topic string
		want  parley.TopicKind
	}{
		{parley.TopicChannel("C1"), parley.TopicKindChannel},
		{parley.TopicUser("U1"), parley.TopicKindUser},
		{parley.TopicPresence("U1"), parley.TopicKindPresence},
		{parley.TopicProfile("U1"), parley.TopicKindProfile},
		{parley.TopicAdmins("W1"), parley.TopicKindAdmins},
		{parley.TopicDirectory("W1"), parley.TopicKindDirectory},
		{parley.TopicPresenceControl, parley.TopicKindOther},
		{parley.TopicNodePresence("n1"), parley.TopicKindOther},
	} {
		if got := parley.TopicKindOf(tc.topic); got != tc.want {
			t.Errorf("TopicKindOf(%q) = %d, want %d", tc.topic, got, tc.want)
		}
	}
}

// protocolJSON is what the TypeScript client is held to: the ops, close
// codes, the event types clients may see (internal ones left out) and the
// broadcast mentions.
func protocolJSON(tb testing.TB) []byte {
	tb.Helper()
	type closeCode struct {
		Code      int    `json:"code"`
		Name      string `json:"name"`
		Resumable bool   `json:"resumable"`
		Fatal     bool   `json:"fatal"`
	}
	type eventType struct {
		Type     string `json:"type"`
		Kind     string `json:"kind"`
		Audience string `json:"audience"`
		Reserved bool   `json:"reserved"`
	}
	var out struct {
		Comment           string      `json:"_comment"`
		ServerOps         []string    `json:"server_ops"`
		ClientOps         []string    `json:"client_ops"`
		CloseCodes        []closeCode `json:"close_codes"`
		EventTypes        []eventType `json:"event_types"`
		BroadcastMentions []string    `json:"broadcast_mentions"`
	}
	out.Comment = "Generated from protocol.go by `go test . -run TestProtocolJSON -update`; do not edit."
	out.ServerOps, out.ClientOps = parley.ServerOps, parley.ClientOps
	for _, c := range parley.CloseCodes {
		out.CloseCodes = append(out.CloseCodes, closeCode{c.Code, c.Name, c.Resumable, c.Fatal})
	}
	for _, et := range parley.EventTypes {
		if et.Kind != parley.EventInternal {
			out.EventTypes = append(out.EventTypes, eventType{et.Type, et.Kind.String(), et.Audience.String(), et.Reserved})
		}
	}
	out.BroadcastMentions = parley.BroadcastMentions
	b, err := json.MarshalIndent(out, "", "\t")
	if err != nil {
		tb.Fatal(err)
	}
	return append(b, '\n')
}

// TestProtocolJSON fails when the committed JSON is not the registry's;
// -update rewrites it.
func TestProtocolJSON(t *testing.T) {
	want := protocolJSON(t)
	if *updateProtocol {
		if err := os.WriteFile(protocolJSONPath, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(protocolJSONPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is out of date: run go test . -run TestProtocolJSON -update", protocolJSONPath)
	}
}

// TestProtocolDeclaredOnce reads every non-test Go file of the module and
// fails on a protocol string spelled outside protocol.go: an event type, a
// topic prefix, a broadcast mention, an op in a JSON frame or an Op field,
// a gateway close code (or a new one declared outside the table).
func TestProtocolDeclaredOnce(t *testing.T) {
	strs := map[string]string{} // literal → what it is
	for _, et := range parley.EventTypes {
		strs[et.Type] = "event type"
	}
	for _, p := range []string{parley.TopicPrefixChannel, parley.TopicPrefixUser, parley.TopicPrefixPresence,
		parley.TopicPrefixProfile, parley.TopicPrefixAdmins, parley.TopicPrefixDirectory, parley.TopicPresenceControl} {
		strs[p] = "topic"
	}
	for _, m := range parley.BroadcastMentions {
		strs["@"+m] = "broadcast mention"
	}
	strs[parley.MentionHere] = "broadcast mention"
	strs[parley.MentionEveryone] = "broadcast mention"
	ops := map[string]bool{}
	for _, op := range slices.Concat(parley.ServerOps, parley.ClientOps) {
		ops[op] = true
	}
	opInJSON := regexp.MustCompile(`"op"\s*:\s*"([a-z_]+)"`)

	var found []string
	report := func(fset *token.FileSet, n ast.Node, format string, args ...any) {
		found = append(found, fset.Position(n.Pos()).String()+": "+fmt.Sprintf(format, args...))
	}
	files := moduleGoFiles(t)
	if len(files) < 50 {
		t.Fatalf("found only %d Go files: is the test running at the module root?", len(files))
	}
	for _, path := range files {
		if path == "protocol.go" {
			continue
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.Field:
				return false // struct tags are field names, not protocol values
			case *ast.KeyValueExpr:
				// Frame{Op: "…"} and map[string]string{"op": "…"}.
				if isOpName(n.Key) {
					if lit, ok := n.Value.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						report(fset, lit, "op %s spelled out", lit.Value)
					}
				}
			case *ast.ValueSpec:
				// const CloseFrameFlood = 4010: a close code the table lacks.
				for i, name := range n.Names {
					if i < len(n.Values) && strings.HasPrefix(name.Name, "Close") {
						if lit, ok := n.Values[i].(*ast.BasicLit); ok && lit.Kind == token.INT {
							report(fset, lit, "close code %s declared as %s", lit.Value, name.Name)
						}
					}
				}
			case *ast.BinaryExpr:
				// f.Op == "…"
				for _, pair := range [][2]ast.Expr{{n.X, n.Y}, {n.Y, n.X}} {
					if lit, ok := pair[1].(*ast.BasicLit); ok && lit.Kind == token.STRING && isOpName(pair[0]) {
						report(fset, lit, "op %s spelled out", lit.Value)
					}
				}
			case *ast.BasicLit:
				switch n.Kind {
				case token.STRING:
					s, err := strconv.Unquote(n.Value)
					if err != nil {
						return true
					}
					if what, ok := strs[s]; ok {
						report(fset, n, "%s %q spelled out", what, s)
					}
					for _, m := range opInJSON.FindAllStringSubmatch(s, -1) {
						if ops[m[1]] {
							report(fset, n, "op %q spelled out in a frame", m[1])
						}
					}
				case token.INT:
					if v, err := strconv.Atoi(n.Value); err == nil && v >= 4000 && v < 5000 {
						if _, ok := parley.LookupCloseCode(v); ok {
							report(fset, n, "close code %d spelled out", v)
						}
					}
				}
			}
			return true
		})
	}
	for _, f := range found {
		t.Error(f + ": use the name in protocol.go")
	}
}

// isOpName reports whether e is an Op field (x.Op, Op:) or an "op" key.
func isOpName(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name == "Op"
	case *ast.SelectorExpr:
		return e.Sel.Name == "Op"
	case *ast.BasicLit:
		return e.Value == `"op"`
	}
	return false
}

// moduleGoFiles lists the module's non-test Go files, relative to its root.
func moduleGoFiles(tb testing.TB) []string {
	tb.Helper()
	var files []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != "." && (name == "node_modules" || name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return files
}
