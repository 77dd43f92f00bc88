package transfer

import (
	"archive/zip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"parley"
	"parley/files"
)

// The files of imported messages: their bytes are taken from the export's
// zip when it carries them, else downloaded from the source's URL with a
// token (Slack's url_private needs "Authorization: Bearer xoxb-…"), stored
// through the file service (local directory or S3) and attached to their
// message by the store, each in one transaction that also marks it done:
// a second run fetches nothing twice and a killed run goes on with what is
// left (docs/import.md, "Files").

// FileStorer stores bytes; *files.Service is one.
type FileStorer interface {
	Ingest(ctx context.Context, workspaceID, name string, r io.Reader, max int64) (parley.File, error)
	Discard(ctx context.Context, f parley.File)
	Quota() parley.FileQuota
}

var _ FileStorer = (*files.Service)(nil)

// DefaultFileHosts are the hosts a Slack token is sent to: Slack's file
// hosts. A URL of an export naming another host gets no request (an
// export must not be able to send the token elsewhere).
var DefaultFileHosts = []string{"files.slack.com", ".slack.com", ".slack-edge.com"}

// FileOptions tune ImportFiles.
type FileOptions struct {
	WorkspaceID string
	// Token is sent as "Authorization: Bearer <Token>"; "" downloads
	// nothing (files in Zip are still taken).
	Token string
	// Hosts a download may go to (default DefaultFileHosts); an entry with
	// a leading dot matches the domain's subdomains, one without matches
	// the host alone (a port, if any, is part of the host).
	Hosts []string
	// Zip is the export, for the files it carries (nil: none).
	Zip *zip.Reader
	// Client makes the requests (default: http.Client with Timeout).
	Client *http.Client
	// Concurrency bounds the downloads at once (default 4, at most 64).
	Concurrency int
	// Timeout bounds one file's download (default 10 minutes).
	Timeout time.Duration
	// Progress is called after each file.
	Progress func(done, total int)
}

// FileSummary is what ImportFiles did. Failed counts the files not
// attached by reason; a rerun tries them again.
type FileSummary struct {
	Attached   int            `json:"attached"`
	FromZip    int            `json:"from_zip"`
	Downloaded int            `json:"downloaded"`
	Bytes      int64          `json:"bytes"`
	Failed     map[string]int `json:"failed,omitempty"`
	// Waiting are the files left for a run with a token (no token given).
	Waiting int `json:"waiting_for_token,omitempty"`
}

// Failure reasons of FileSummary.Failed.
const (
	FailNotFound     = "not found (404 or 410)"
	FailUnauthorized = "refused (401 or 403: check the token)"
	FailTimeout      = "timed out"
	FailTooLarge     = "over the file size limit or the workspace quota"
	FailHost         = "URL not on an allowed host"
	FailNoURL        = "no URL in the export"
	FailOther        = "other errors"
	FailGone         = "message deleted"
)

type fileJob struct {
	p    parley.PendingImportFile
	zipF *zip.File
}

// ImportFiles fetches, stores and attaches every pending file of the
// workspace. Per-file failures are counted, never fatal; the error is for
// the store or ctx failing.
func ImportFiles(ctx context.Context, st parley.ImportFileStore, fs FileStorer, o FileOptions) (*FileSummary, error) {
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	o.Concurrency = min(o.Concurrency, 64)
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Minute
	}
	if o.Client == nil {
		o.Client = &http.Client{Timeout: o.Timeout}
	}
	if o.Hosts == nil {
		o.Hosts = DefaultFileHosts
	}
	inZip := zipFiles(o.Zip)
	var jobs []fileJob
	sum := &FileSummary{Failed: map[string]int{}}
	after, afterPos := "", 0
	for {
		page, err := st.PendingImportFiles(ctx, o.WorkspaceID, after, afterPos, 500)
		if err != nil {
			return nil, fmt.Errorf("import files: %w", err)
		}
		for _, p := range page {
			j := fileJob{p: p, zipF: inZip[p.ExtID]}
			if j.zipF == nil && o.Token == "" {
				sum.Waiting++
				continue
			}
			jobs = append(jobs, j)
		}
		if len(page) < 500 {
			break
		}
		after, afterPos = page[len(page)-1].MessageID, page[len(page)-1].Position
	}

	var mu sync.Mutex // guards sum and done
	done := 0
	work := make(chan fileJob)
	var wg sync.WaitGroup
	for range min(o.Concurrency, max(1, len(jobs))) {
		wg.Go(func() {
			for j := range work {
				if ctx.Err() != nil {
					continue // cut off: the rest is for the next run
				}
				res, n, err := importFile(ctx, st, fs, o, j)
				mu.Lock()
				switch {
				case err != nil:
					sum.Failed[res]++
				default:
					sum.Attached++
					sum.Bytes += n
					if j.zipF != nil {
						sum.FromZip++
					} else {
						sum.Downloaded++
					}
				}
				done++
				d := done
				mu.Unlock()
				if o.Progress != nil {
					o.Progress(d, len(jobs))
				}
			}
		})
	}
feed:
	for _, j := range jobs {
		select {
		case work <- j:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for k, v := range sum.Failed {
		if v == 0 {
			delete(sum.Failed, k)
		}
	}
	return sum, nil
}

// importFile fetches one file and attaches it; on failure it says why
// (a Fail… reason).
func importFile(ctx context.Context, st parley.ImportFileStore, fs FileStorer, o FileOptions, j fileJob) (string, int64, error) {
	q := fs.Quota()
	if q.MaxFileBytes > 0 && j.p.Size > q.MaxFileBytes {
		return FailTooLarge, 0, errors.New("too large")
	}
	name := fileName(j.p)
	var body io.ReadCloser
	if j.zipF != nil {
		rc, err := j.zipF.Open()
		if err != nil {
			return FailOther, 0, err
		}
		body = rc
	} else {
		fctx, cancel := context.WithTimeout(ctx, o.Timeout)
		defer cancel()
		rc, reason, err := download(fctx, o, j.p.URL, q.MaxFileBytes)
		if err != nil {
			return reason, 0, err
		}
		body = rc // read under fctx: the timeout bounds the download
	}
	defer body.Close()
	f, err := fs.Ingest(ctx, o.WorkspaceID, name, body, q.MaxFileBytes)
	if err != nil {
		switch {
		case errors.Is(err, files.ErrTooLarge):
			return FailTooLarge, 0, err
		case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
			return FailTimeout, 0, err
		}
		return FailOther, 0, err
	}
	f.Name = name
	if _, err := st.AttachImportedFile(context.WithoutCancel(ctx), o.WorkspaceID, j.p, f, q); err != nil {
		fs.Discard(context.WithoutCancel(ctx), f)
		switch parley.ErrorCode(err) {
		case parley.ETOOLARGE:
			return FailTooLarge, 0, err
		case parley.ENOTFOUND:
			return FailGone, 0, err
		case parley.ECONFLICT:
			return FailOther, 0, err // attached by another run meanwhile
		}
		return FailOther, 0, err
	}
	return "", f.Size, nil
}

// download GETs url with the token and returns the body, checked against
// the size limit by its Content-Length when it has one.
func download(ctx context.Context, o FileOptions, raw string, max int64) (io.ReadCloser, string, error) {
	if raw == "" {
		return nil, FailNoURL, errors.New("no URL")
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || !hostAllowed(u.Host, o.Hosts) {
		return nil, FailHost, fmt.Errorf("URL %q is not on an allowed host", raw)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, FailOther, err
	}
	req.Header.Set("Authorization", "Bearer "+o.Token)
	// Redirects keep the header only within the allowed hosts.
	client := *o.Client
	client.CheckRedirect = func(r *http.Request, via []*http.Request) error {
		if len(via) >= 5 || !hostAllowed(r.URL.Host, o.Hosts) {
			return http.ErrUseLastResponse
		}
		return nil
	}
	res, err := client.Do(req)
	if err != nil {
		if isTimeout(err) || errors.Is(err, context.DeadlineExceeded) {
			return nil, FailTimeout, err
		}
		return nil, FailOther, err
	}
	switch {
	case res.StatusCode == http.StatusOK:
	case res.StatusCode == http.StatusNotFound || res.StatusCode == http.StatusGone:
		res.Body.Close()
		return nil, FailNotFound, fmt.Errorf("GET %s: %s", u.Redacted(), res.Status)
	case res.StatusCode == http.StatusUnauthorized || res.StatusCode == http.StatusForbidden:
		res.Body.Close()
		return nil, FailUnauthorized, fmt.Errorf("GET %s: %s", u.Redacted(), res.Status)
	default:
		res.Body.Close()
		return nil, FailOther, fmt.Errorf("GET %s: %s", u.Redacted(), res.Status)
	}
	// Slack answers a request its token cannot see with a 200 HTML login page.
	if strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") && strings.Contains(u.Host, "slack") {
		res.Body.Close()
		return nil, FailUnauthorized, fmt.Errorf("GET %s: a login page, not the file", u.Redacted())
	}
	if max > 0 && res.ContentLength > max {
		res.Body.Close()
		return nil, FailTooLarge, fmt.Errorf("GET %s: %d bytes", u.Redacted(), res.ContentLength)
	}
	return res.Body, "", nil
}

func hostAllowed(host string, allowed []string) bool {
	host = strings.ToLower(host)
	bare := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		bare = h
	}
	for _, a := range allowed {
		a = strings.ToLower(a)
		if strings.HasPrefix(a, ".") {
			if strings.HasSuffix(bare, a) {
				return true
			}
		} else if host == a || (bare == a && bare == host) {
			return true
		}
	}
	return false
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// zipFiles indexes the files an export carries by file id: any entry with
// a path segment equal to the id and a name after it
// ("__uploads/F0123/report.pdf", "files/F0123/report.pdf").
func zipFiles(z *zip.Reader) map[string]*zip.File {
	out := map[string]*zip.File{}
	if z == nil {
		return out
	}
	for _, f := range z.File {
		if f.FileInfo().IsDir() {
			continue
		}
		dir := path.Dir(f.Name)
		id := path.Base(dir)
		if id != "." && id != "/" && strings.HasPrefix(id, "F") {
			out[id] = f
		}
	}
	return out
}

// fileName makes the source's name a valid Parley file name.
func fileName(p parley.PendingImportFile) string {
	n := p.Name
	if n == "" {
		n = p.Title
	}
	n = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == '/' || r == '\\' || r == utf8.RuneError {
			return '_'
		}
		return r
	}, n)
	for len(n) > parley.MaxFileNameBytes {
		_, size := utf8.DecodeLastRuneInString(n)
		n = n[:len(n)-size]
	}
	if n == "" || n == "." || n == ".." {
		n = p.ExtID
	}
	return n
}
