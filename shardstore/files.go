package shardstore

import (
	"context"
	"fmt"
	"time"

	"parley"
	"parley/storeguard"
)

// parley.FileService over the shards: a file's metadata and its
// workspace's usage live on the workspace's shard (a message and the files
// it takes are always on one shard); file and upload ids find their
// workspace as channel ids do. The sweeper's calls ask every shard. The
// signing key is the control database's.

var _ parley.FileService = (*Router)(nil)

// guarded runs fn on p's store under its guard.
func guarded[T any](ctx context.Context, p *pool, purpose storeguard.Purpose, fn func(context.Context) (T, error)) (T, error) {
	var v T
	err := p.g.Run(ctx, purpose, func(ctx context.Context) (err error) {
		v, err = fn(ctx)
		return err
	})
	return v, err
}

func (r *Router) CheckUpload(ctx context.Context, actor, workspaceID string, size int64, q parley.FileQuota) error {
	p, err := r.routeWrite(ctx, workspaceID)
	if err != nil {
		return err
	}
	return p.g.Run(ctx, storeguard.Read, func(ctx context.Context) error {
		return p.s.CheckUpload(ctx, actor, workspaceID, size, q)
	})
}

func (r *Router) CreateFile(ctx context.Context, actor, workspaceID string, f parley.File, q parley.FileQuota) (*parley.File, error) {
	p, err := r.routeWrite(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	return guarded(ctx, p, storeguard.Write, func(ctx context.Context) (*parley.File, error) {
		return p.s.CreateFile(ctx, actor, workspaceID, f, q)
	})
}

func (r *Router) GetFile(ctx context.Context, actor, fileID string) (*parley.File, error) {
	p, err := r.routeID(ctx, kindFile, fileID, false)
	if err != nil {
		return nil, err
	}
	return guarded(ctx, p, storeguard.Read, func(ctx context.Context) (*parley.File, error) {
		return p.s.GetFile(ctx, actor, fileID)
	})
}

func (r *Router) ListChannelFiles(ctx context.Context, actor, channelID, cursor string, limit int) (*parley.FilePage, error) {
	p, err := r.routeID(ctx, kindChannel, channelID, false)
	if err != nil {
		return nil, err
	}
	return guarded(ctx, p, storeguard.History, func(ctx context.Context) (*parley.FilePage, error) {
		return p.s.ListChannelFiles(ctx, actor, channelID, cursor, limit)
	})
}

func (r *Router) DeleteFile(ctx context.Context, actor, fileID string) error {
	p, err := r.routeID(ctx, kindFile, fileID, true)
	if err != nil {
		return err
	}
	return p.g.Run(ctx, storeguard.Write, func(ctx context.Context) error { return p.s.DeleteFile(ctx, actor, fileID) })
}

func (r *Router) CreateUpload(ctx context.Context, actor, workspaceID string, u parley.NewUpload, q parley.FileQuota) (*parley.Upload, error) {
	p, err := r.routeWrite(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	return guarded(ctx, p, storeguard.Write, func(ctx context.Context) (*parley.Upload, error) {
		return p.s.CreateUpload(ctx, actor, workspaceID, u, q)
	})
}

func (r *Router) GetUpload(ctx context.Context, actor, uploadID string) (*parley.Upload, error) {
	p, err := r.routeID(ctx, kindUpload, uploadID, false)
	if err != nil {
		return nil, err
	}
	return guarded(ctx, p, storeguard.Read, func(ctx context.Context) (*parley.Upload, error) {
		return p.s.GetUpload(ctx, actor, uploadID)
	})
}

func (r *Router) AdvanceUpload(ctx context.Context, actor, uploadID string, from, to int64) (*parley.Upload, error) {
	p, err := r.routeID(ctx, kindUpload, uploadID, true)
	if err != nil {
		return nil, err
	}
	return guarded(ctx, p, storeguard.Write, func(ctx context.Context) (*parley.Upload, error) {
		return p.s.AdvanceUpload(ctx, actor, uploadID, from, to)
	})
}

func (r *Router) DeleteUpload(ctx context.Context, actor, uploadID string) error {
	p, err := r.routeID(ctx, kindUpload, uploadID, true)
	if err != nil {
		return err
	}
	return p.g.Run(ctx, storeguard.Write, func(ctx context.Context) error { return p.s.DeleteUpload(ctx, actor, uploadID) })
}

// SweepFiles asks every shard for up to limit files to sweep.
func (r *Router) SweepFiles(ctx context.Context, limit int) ([]parley.File, error) {
	parts, err := each(r, ctx, "sweep files", func(ctx context.Context, p *pool) ([]parley.File, error) {
		return guarded(ctx, p, storeguard.Read, func(ctx context.Context) ([]parley.File, error) { return p.s.SweepFiles(ctx, limit) })
	})
	if err != nil {
		return nil, err
	}
	out := []parley.File{}
	for _, part := range parts {
		for _, f := range part {
			if len(out) < limit {
				out = append(out, f)
			}
		}
	}
	return out, nil
}

// PurgeFiles forgets the files on every shard (each has some or none).
func (r *Router) PurgeFiles(ctx context.Context, fileIDs []string) error {
	_, err := each(r, ctx, "purge files", func(ctx context.Context, p *pool) (struct{}, error) {
		return struct{}{}, p.g.Run(ctx, storeguard.Write, func(ctx context.Context) error { return p.s.PurgeFiles(ctx, fileIDs) })
	})
	return err
}

func (r *Router) ExpiredUploads(ctx context.Context, now time.Time, limit int) ([]parley.Upload, error) {
	parts, err := each(r, ctx, "expired uploads", func(ctx context.Context, p *pool) ([]parley.Upload, error) {
		return guarded(ctx, p, storeguard.Read, func(ctx context.Context) ([]parley.Upload, error) {
			return p.s.ExpiredUploads(ctx, now, limit)
		})
	})
	if err != nil {
		return nil, err
	}
	out := []parley.Upload{}
	for _, part := range parts {
		for _, u := range part {
			if len(out) < limit {
				out = append(out, u)
			}
		}
	}
	return out, nil
}

func (r *Router) DeleteWorkspaceFiles(ctx context.Context, workspaceID string) error {
	p, _, err := r.route(ctx, workspaceID)
	if err != nil {
		return err
	}
	return p.g.Run(ctx, storeguard.Write, func(ctx context.Context) error { return p.s.DeleteWorkspaceFiles(ctx, workspaceID) })
}

func (r *Router) FileSigningKey(ctx context.Context) ([]byte, error) {
	return guarded(ctx, r.def, storeguard.Read, func(ctx context.Context) ([]byte, error) { return r.def.s.FileSigningKey(ctx) })
}

var _ parley.Exporter = (*Router)(nil)

// ExportWorkspace streams a workspace from its shard. It is not under the
// shard's guard: an export of a big workspace runs for minutes by design,
// which the breaker would count as slow calls. It is held in flight on the
// guard all the same, so that a store replaced after a DSN change is not
// closed under it.
func (r *Router) ExportWorkspace(ctx context.Context, actor, workspaceID string, opts parley.ExportOptions, sink parley.ExportSink) error {
	p, _, err := r.route(ctx, workspaceID)
	if err != nil {
		return err
	}
	release, err := p.g.Hold()
	if err != nil {
		return err
	}
	defer release()
	return p.s.ExportWorkspace(ctx, actor, workspaceID, opts, sink)
}

// WorkspaceOwner returns the id of the workspace with that slug, wherever
// it is, and of its owner (`parley export` acts as the owner). Every shard
// is asked for the slug (with a shard not answering and no other having
// it, EUNAVAILABLE rather than ENOTFOUND); the owner is read on the shard
// the workspace routes to, so a copy a move left on its source does not
// answer for it.
func (r *Router) WorkspaceOwner(ctx context.Context, slug string) (workspaceID, ownerID string, err error) {
	if err := parley.ValidateSlug(slug); err != nil {
		return "", "", err
	}
	id, err := r.scatterFind(ctx, "workspace "+slug, func(ctx context.Context, p *pool) (string, error) {
		id, _, err := p.s.WorkspaceOwner(ctx, slug)
		return id, err
	})
	if err != nil {
		return "", "", err
	}
	p, _, err := r.route(ctx, id)
	if err != nil {
		return "", "", err
	}
	ws, owner, err := p.s.WorkspaceOwner(ctx, slug)
	if err != nil {
		return "", "", fmt.Errorf("workspace %q on shard %s: %w", slug, p.id, err)
	}
	if ws != id {
		// Renamed and its old slug taken since the scatter read it.
		return "", "", parley.Errorf(parley.ECONFLICT, "workspace %q changed while it was looked up; try again", slug)
	}
	return ws, owner, nil
}
