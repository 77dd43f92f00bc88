package parley

import (
	"context"
	"time"
)

// PrefixFile starts the id of an uploaded file.
const PrefixFile = "F"

// File is an uploaded file. Messages carry the public part (id to
// thumbnail); GET /files/{id} adds where it is attached and short-lived
// signed URLs for its bytes.
type File struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Size int64  `json:"size"`
	// ContentType is what the server sniffed from the bytes, never what
	// the client said.
	ContentType string `json:"content_type"`
	// Width and Height are an image's pixels; 0 for anything else.
	Width     int  `json:"width,omitempty"`
	Height    int  `json:"height,omitempty"`
	Thumbnail bool `json:"thumbnail,omitempty"` // a thumbnail exists
	// UserID uploaded it.
	UserID    string    `json:"user_id"`
	CreatedAt time.Time `json:"created_at"`

	// Where it is attached: set once a message takes it.
	ChannelID string `json:"channel_id,omitempty"`
	MessageID string `json:"message_id,omitempty"`
	// URL and ThumbnailURL are signed, short-lived download URLs (on GET
	// /files/{id} and uploads, never stored or sent in events).
	URL          string     `json:"url,omitempty"`
	ThumbnailURL string     `json:"thumbnail_url,omitempty"`
	URLExpiresAt *time.Time `json:"url_expires_at,omitempty"`

	WorkspaceID string `json:"-"`
	// StorageKey and ThumbnailKey name the bytes in the file storage.
	StorageKey   string `json:"-"`
	ThumbnailKey string `json:"-"`
}

// MaxFilesPerMessage bounds the file_ids of one post.
const MaxFilesPerMessage = 10

// MaxFileNameBytes bounds a file's name.
const MaxFileNameBytes = 255

// FilePage is one page of a channel's files, newest first.
type FilePage struct {
	Files      []File `json:"files"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// FileQuota is the limits an upload is checked against (0: no limit).
type FileQuota struct {
	MaxFileBytes      int64
	WorkspaceMaxBytes int64
}

// NewUpload is a resumable upload being created.
type NewUpload struct {
	ID         string
	FileID     string
	Name       string
	Size       int64
	ChunkSize  int64
	StorageKey string
	BackendID  string // the storage's multipart upload id
	ExpiresAt  time.Time
}

// Upload is a resumable upload in progress (docs/files.md): the client
// sends chunk after chunk at Offset until Offset is Size, then completes.
type Upload struct {
	ID          string    `json:"id"`
	WorkspaceID string    `json:"workspace_id"`
	Name        string    `json:"name"`
	Size        int64     `json:"size"`
	Offset      int64     `json:"offset"`
	ChunkSize   int64     `json:"chunk_size"`
	ExpiresAt   time.Time `json:"expires_at"`

	UserID     string `json:"-"`
	FileID     string `json:"-"`
	StorageKey string `json:"-"`
	BackendID  string `json:"-"`
}

// FileService stores file metadata, authorises access to files and keeps
// each workspace's usage. The bytes live in a files.Storage; this service
// never sees them. Methods that take an actor authorise as the rest of the
// store does: files of other workspaces, of channels the actor cannot
// read, and unattached files of other uploaders are ENOTFOUND.
type FileService interface {
	// CheckUpload says whether actor may upload size bytes (-1: not known
	// yet) to the workspace now, before any byte is stored; CreateFile
	// checks again.
	CheckUpload(ctx context.Context, actor, workspaceID string, size int64, q FileQuota) error
	// CreateFile records a file whose bytes are stored, after checking that
	// actor is an active member of the workspace and that the workspace's
	// usage stays within q (ETOOLARGE otherwise); usage grows by f.Size.
	CreateFile(ctx context.Context, actor, workspaceID string, f File, q FileQuota) (*File, error)
	// GetFile returns a live file that actor may download.
	GetFile(ctx context.Context, actor, fileID string) (*File, error)
	// ListChannelFiles pages the files attached to live messages of a
	// channel actor can read, newest first.
	ListChannelFiles(ctx context.Context, actor, channelID, cursor string, limit int) (*FilePage, error)
	// DeleteFile deletes a file that is not attached (its uploader only).
	DeleteFile(ctx context.Context, actor, fileID string) error

	// CreateUpload starts a resumable upload after the same checks as
	// CreateFile (q against u.Size).
	CreateUpload(ctx context.Context, actor, workspaceID string, u NewUpload, q FileQuota) (*Upload, error)
	// GetUpload returns actor's upload that has not expired.
	GetUpload(ctx context.Context, actor, uploadID string) (*Upload, error)
	// AdvanceUpload moves an upload's offset from `from` to `to`; ECONFLICT
	// when its offset is no longer `from` (another request got there first).
	AdvanceUpload(ctx context.Context, actor, uploadID string, from, to int64) (*Upload, error)
	// DeleteUpload forgets an upload (completed or aborted).
	DeleteUpload(ctx context.Context, actor, uploadID string) error

	// SweepFiles returns up to limit files whose bytes are to be removed:
	// deleted with their message or workspace. PurgeFiles forgets them
	// once the bytes are gone.
	SweepFiles(ctx context.Context, limit int) ([]File, error)
	PurgeFiles(ctx context.Context, fileIDs []string) error
	// ExpiredUploads returns up to limit uploads past their expiry.
	ExpiredUploads(ctx context.Context, now time.Time, limit int) ([]Upload, error)
	// DeleteWorkspaceFiles forgets every file of a workspace and its usage,
	// and expires its uploads (for the sweeper to abort). The caller
	// removes the bytes: files.Service.DeleteWorkspaceFiles does both.
	DeleteWorkspaceFiles(ctx context.Context, workspaceID string) error
	// FileSigningKey returns the cluster's key for signed download URLs,
	// made on first use.
	FileSigningKey(ctx context.Context) ([]byte, error)
}

// ValidateFileName checks an uploaded file's name: 1 to MaxFileNameBytes
// bytes of text without control characters or path separators (the name
// ends up in Content-Disposition and on people's disks).
func ValidateFileName(name string) error {
	if err := CheckText("name", name); err != nil {
		return err
	}
	if name == "" || len(name) > MaxFileNameBytes {
		return Errorf(EINVALID, "a file name has 1 to %d bytes", MaxFileNameBytes)
	}
	if name == "." || name == ".." {
		return Errorf(EINVALID, "invalid file name")
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f || r == '/' || r == '\\' {
			return Errorf(EINVALID, "a file name has no control characters, '/' or '\\'")
		}
	}
	return nil
}

// FileConfig holds the live file limits (docs/files.md); 0 is no limit.
type FileConfig struct {
	// FileMaxMB: the largest file one may upload, in MiB.
	FileMaxMB int `json:"file_max_mb"`
	// FileWorkspaceQuotaMB: the bytes of live files a workspace may hold,
	// in MiB.
	FileWorkspaceQuotaMB int `json:"file_workspace_quota_mb"`
}

// DefaultFileConfig: 1 GiB per file, 10 GiB per workspace.
func DefaultFileConfig() FileConfig {
	return FileConfig{FileMaxMB: 1024, FileWorkspaceQuotaMB: 10 * 1024}
}

// MaxFileConfigMB bounds both file keys (1 PiB).
const MaxFileConfigMB = 1 << 30

// Quota is the FileQuota the configuration sets.
func (c FileConfig) Quota() FileQuota {
	return FileQuota{MaxFileBytes: int64(c.FileMaxMB) << 20, WorkspaceMaxBytes: int64(c.FileWorkspaceQuotaMB) << 20}
}
