package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"parley"
	"parley/sqlstore"
	"parley/storetest"
	"parley/transfer"
	"parley/transfer/transfertest"
)

// The import and export commands, run as the real binary on a SQLite data
// directory: a Slack import, its rerun, a SIGKILL in the middle of an
// import and the rerun that finishes it, and an export imported back.

// importFixture writes a generated Slack export and creates the owner's
// account in a new data directory.
func importFixture(t *testing.T, messages int) (data, zipPath string, ex *transfertest.Export) {
	t.Helper()
	data = t.TempDir()
	ex = transfertest.Generate(transfertest.Config{Seed: 11, Messages: messages})
	zipPath = filepath.Join(t.TempDir(), "slack.zip")
	if err := os.WriteFile(zipPath, ex.Zip, 0o600); err != nil {
		t.Fatal(err)
	}
	s := openData(t, data)
	if _, err := s.CreateUser(context.Background(), parley.NewUser{Email: "owner@example.com", Handle: "owner", Name: "Owner", PasswordHash: "x"}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	return data, zipPath, ex
}

func openData(t *testing.T, data string) *sqlstore.Store {
	t.Helper()
	s, err := sqlstore.Open(context.Background(), sqlstore.Config{Path: filepath.Join(data, "parley.db")})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func runParley(t *testing.T, args ...string) (string, string) {
	t.Helper()
	cmd := exec.Command(binPath, args...)
	cmd.Env = cleanEnv()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("parley %q: %v\n%s\n%s", args, err, out, stderr.String())
	}
	return string(out), stderr.String()
}

func totalMessages(ex *transfertest.Export) int {
	n := 0
	for _, ms := range ex.Messages {
		n += len(ms)
	}
	return n
}

func TestImportExportCommands(t *testing.T) {
	data, zipPath, ex := importFixture(t, 1500)
	total := totalMessages(ex)
	out, stderr := runParley(t, "import", "slack", zipPath, "--workspace", "acme", "--owner", "owner@example.com",
		"--data", data, "--batch", "300", "--progress", "lines")
	for _, want := range []string{"messages    " + strconv.Itoa(total) + " imported", "users       ", "skipped     ",
		"joins       " + strconv.Itoa(ex.Joins) + " join and leave notices", "problem     malformed export: random/2099-01-01.json"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(stderr, "import: 5/5 channels") {
		t.Errorf("no progress lines on stderr:\n%s", stderr)
	}
	out, _ = runParley(t, "import", "slack", zipPath, "--workspace", "acme", "--owner", "owner@example.com",
		"--data", data, "--progress", "off")
	if !strings.Contains(out, "messages    0 imported (0 replies in 0 threads), "+strconv.Itoa(total)+" from an earlier run") {
		t.Errorf("second run:\n%s", out)
	}

	exportPath := filepath.Join(t.TempDir(), "acme.zip")
	out, _ = runParley(t, "export", "--workspace", "acme", "--out", exportPath, "--data", data)
	if !strings.Contains(out, "exported acme") {
		t.Errorf("export: %s", out)
	}
	out, _ = runParley(t, "import", "parley", exportPath, "--workspace", "acme-copy", "--owner", "owner@example.com",
		"--data", data, "--json", "--progress", "off")
	var sum transfer.Summary
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	if sum.Messages == 0 || sum.UsersCreated != 0 || len(sum.Problems) != 0 || !sum.WorkspaceCreated {
		t.Fatalf("import of the export: %+v", sum)
	}

	// Bad input: a clear error and exit status 1.
	cmd := exec.Command(binPath, "import", "slack", exportPath, "--workspace", "acme", "--owner", "owner@example.com", "--data", data)
	cmd.Env = cleanEnv()
	msg, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(msg), "this is a Parley export") {
		t.Fatalf("a Parley export read as Slack's: %v %s", err, msg)
	}
	cmd = exec.Command(binPath, "import", "slack", zipPath, "--workspace", "acme", "--owner", "nobody@example.com", "--data", data)
	cmd.Env = cleanEnv()
	if msg, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(msg), "--owner nobody@example.com") {
		t.Fatalf("an unknown owner: %v %s", err, msg)
	}
}

// TestImportKilled kills an import with SIGKILL after its first batch and
// runs it again: the second run imports exactly the rest, and the
// workspace keeps every invariant.
func TestImportKilled(t *testing.T) {
	data, zipPath, ex := importFixture(t, 2500)
	total := totalMessages(ex)
	cmd := exec.Command(binPath, "import", "slack", zipPath, "--workspace", "acme", "--owner", "owner@example.com",
		"--data", data, "--batch", "50", "--progress", "lines")
	cmd.Env = cleanEnv()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "import: ") {
			break // a batch has committed
		}
	}
	cmd.Process.Kill()
	cmd.Wait()

	out, _ := runParley(t, "import", "slack", zipPath, "--workspace", "acme", "--owner", "owner@example.com",
		"--data", data, "--json", "--progress", "off")
	var sum transfer.Summary
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	if sum.AlreadyImported == 0 || sum.Messages == 0 || sum.Messages+sum.AlreadyImported != total {
		t.Fatalf("after the kill: %d new + %d from the killed run, want %d in all", sum.Messages, sum.AlreadyImported, total)
	}
	s := openData(t, data)
	defer s.Close()
	u, _, err := s.UserCredentials(context.Background(), "owner@example.com")
	if err != nil {
		t.Fatal(err)
	}
	read := storetest.CheckWorkspace(t, s, u.ID, sum.WorkspaceID)
	n := 0
	for _, ms := range read {
		n += len(ms)
	}
	deleted := 0 // the tombstone root and its replies are not readable
	for _, ms := range ex.Messages {
		for _, m := range ms {
			if m.Deleted || (m.Root != "" && strings.Contains(m.Root, "/") && isDeletedRoot(ex, m.Root)) {
				deleted++
			}
		}
	}
	if n != total-deleted {
		t.Fatalf("%d messages readable after kill and rerun, want %d", n, total-deleted)
	}
}

func isDeletedRoot(ex *transfertest.Export, ext string) bool {
	for _, ms := range ex.Messages {
		for _, m := range ms {
			if m.ExtID == ext {
				return m.Deleted
			}
		}
	}
	return false
}

// TestImportSlackFilesCommand: the real binary downloads the export's files
// with the token from the environment (PARLEY_SLACK_TOKEN), only from the
// allowed host, into the data directory, and a second run downloads
// nothing again.
func TestImportSlackFilesCommand(t *testing.T) {
	const token = "xoxb-cli-test"
	var mu sync.Mutex
	hits := map[string]int{}
	png := []byte("\x89PNG\r\n\x1a\n not really an image, stored all the same")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "invalid_auth", http.StatusUnauthorized)
			return
		}
		w.Write(png)
	}))
	defer srv.Close()
	data := t.TempDir()
	ex := transfertest.Generate(transfertest.Config{Seed: 5, Messages: 600, FileURLBase: srv.URL})
	zipPath := filepath.Join(t.TempDir(), "slack.zip")
	if err := os.WriteFile(zipPath, ex.Zip, 0o600); err != nil {
		t.Fatal(err)
	}
	s := openData(t, data)
	if _, err := s.CreateUser(context.Background(), parley.NewUser{Email: "owner@example.com", Handle: "owner", Name: "Owner", PasswordHash: "x"}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	withURL := -1 // FONLY has no URL
	for _, ms := range ex.Messages {
		for _, m := range ms {
			withURL += m.Files
		}
	}
	run := func() transfer.Summary {
		t.Helper()
		cmd := exec.Command(binPath, "import", "slack", zipPath, "--workspace", "acme", "--owner", "owner@example.com",
			"--data", data, "--slack-file-hosts", strings.TrimPrefix(srv.URL, "http://"), "--json", "--progress", "off")
		cmd.Env = cleanEnv("PARLEY_SLACK_TOKEN=" + token)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("import: %v\n%s\n%s", err, out, stderr.String())
		}
		var sum transfer.Summary
		if err := json.Unmarshal(out, &sum); err != nil {
			t.Fatalf("--json: %v\n%s", err, out)
		}
		return sum
	}
	first := run()
	fi := first.FileImport
	if fi == nil || fi.Attached != withURL || fi.Downloaded != withURL || fi.Failed[transfer.FailNoURL] != 1 || fi.Bytes != int64(withURL*len(png)) {
		t.Fatalf("first run: %+v", fi)
	}
	mu.Lock()
	n := len(hits)
	mu.Unlock()
	if n != withURL {
		t.Fatalf("%d paths fetched, want %d", n, withURL)
	}
	stored := 0
	filepath.WalkDir(filepath.Join(data, "files"), func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			stored++
		}
		return nil
	})
	if stored != withURL {
		t.Fatalf("%d files stored under <data>/files, want %d", stored, withURL)
	}
	second := run()
	if fi := second.FileImport; fi == nil || fi.Attached != 0 || fi.Failed[transfer.FailNoURL] != 1 {
		t.Fatalf("second run: %+v", fi)
	}
	mu.Lock()
	defer mu.Unlock()
	for p, k := range hits {
		if k != 1 {
			t.Fatalf("%s fetched %d times", p, k)
		}
	}
}
