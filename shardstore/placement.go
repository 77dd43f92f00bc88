package shardstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"parley"
	"parley/storeguard"
)

// Keeping the catalogue in step with the shards when a creation or a
// deletion is half done: a placement whose workspace was not created is
// removed (Catalogue.Unplace), a deleted workspace's slug is freed
// (Catalogue.FreeSlug), and a purged workspace's placement is removed.
// All are retried in the background with backoff when the control
// database (or, for the check before a removal, the shard) does not
// answer, for about ten minutes, through later, as user-copy repairs are.

// attemptTimeout bounds one attempt of any of them, and of every retry
// later makes.
const attemptTimeout = 10 * time.Second

// definite reports whether a failed creation certainly wrote nothing: the
// shard was never reached, or the store refused the call inside its
// transaction (a client error: the transaction rolled back). Any other
// error (a lost connection, a timeout) may hide a commit.
func definite(err error) bool {
	switch parley.ErrorCode(err) {
	case parley.EINVALID, parley.ECONFLICT, parley.EFORBIDDEN, parley.ENOTFOUND, parley.ELIMIT:
		return true
	}
	return false
}

// unplace removes the placement of workspace ws on shard after its
// creation failed with cause; attempted says whether the creation itself
// was sent to the shard. When it was and cause may hide a commit, the
// shard is asked first whether it has the workspace, and the entry is
// removed only when it does not: a workspace that exists never loses its
// entry. The shard answers only once no creation of the workspace can
// still commit (sqlstore.HasWorkspace waits for one in flight), so this
// runs in the background. A certain failure's first attempt is made
// before the caller returns.
func (r *Router) unplace(shard, ws string, cause error, attempted bool) {
	r.placed.Delete(ws)
	check := attempted && !definite(cause)
	if !check {
		err := r.attempt(func(ctx context.Context) error { return r.tryUnplace(ctx, shard, ws, false) })
		if err == nil || errors.Is(err, errKept) {
			return
		}
		r.log.Warn("placement of a failed creation not removed yet; retrying", "workspace", ws, "shard", shard, "err", err)
		r.m.undos.WithLabelValues(shard, "retry").Inc()
	}
	r.later("unplace "+ws, func(ctx context.Context) error {
		err := r.tryUnplace(ctx, shard, ws, check)
		if err != nil && !errors.Is(err, errKept) {
			r.m.undos.WithLabelValues(shard, "retry").Inc()
			r.log.Debug("placement of a failed creation not removed yet", "workspace", ws, "shard", shard, "err", err)
			return err
		}
		return nil
	}, func() {
		r.m.undos.WithLabelValues(shard, "gave_up").Inc()
		r.log.Error("placement of a failed creation left in the directory", "workspace", ws, "shard", shard, "cause", cause)
	})
}

// errKept: the shard has the workspace after all; its entry stays.
var errKept = errors.New("the shard has the workspace")

// tryUnplace makes one attempt: check (when asked) that the shard does
// not have ws, then remove the entry. An entry already gone is done.
func (r *Router) tryUnplace(ctx context.Context, shard, ws string, check bool) error {
	if check {
		p, err := r.poolByID(ctx, shard)
		if err != nil {
			return err
		}
		var has bool
		if err := p.g.Run(ctx, storeguard.Write, func(ctx context.Context) (err error) {
			has, err = p.s.HasWorkspace(ctx, ws)
			return err
		}); err != nil {
			return fmt.Errorf("ask shard %s for workspace %s: %w", shard, ws, err)
		}
		if has {
			r.m.undos.WithLabelValues(shard, "kept").Inc()
			r.log.Warn("a creation that reported failure did commit: its placement stays", "workspace", ws, "shard", shard)
			return errKept
		}
	}
	_, err := r.cfg.Catalogue.Unplace(ctx, ws, shard)
	switch parley.ErrorCode(err) {
	case "", parley.ENOTFOUND:
		r.m.undos.WithLabelValues(shard, "ok").Inc()
		r.log.Info("placement of a failed creation removed", "workspace", ws, "shard", shard)
		return nil
	case parley.ECONFLICT:
		// Moved or frozen since (an operator acted on it): not ours
		// to remove any more.
		r.m.undos.WithLabelValues(shard, "kept").Inc()
		r.log.Warn("placement of a failed creation changed since; left as it is", "workspace", ws, "shard", shard, "err", err)
		return errKept
	}
	return err
}

// freeSlug gives up the catalogue's reservation of a deleted workspace's
// slug (the single database frees it at deletion too), retried in the
// background when the control database does not answer.
func (r *Router) freeSlug(ws, slug string) {
	try := func(ctx context.Context) error {
		err := r.cfg.Catalogue.FreeSlug(ctx, ws, slug)
		if err != nil {
			r.m.slugFrees.WithLabelValues("retry").Inc()
			return err
		}
		r.m.slugFrees.WithLabelValues("ok").Inc()
		return nil
	}
	if err := r.attempt(try); err != nil {
		r.log.Warn("slug of a deleted workspace not freed yet; retrying", "workspace", ws, "err", err)
		r.later("free slug "+ws, try, func() {
			r.m.slugFrees.WithLabelValues("gave_up").Inc()
			r.log.Error("slug of a deleted workspace left reserved", "workspace", ws, "slug", slug)
		})
	}
}

// unplacePurged removes the directory entry of workspace ws, whose purge
// has just emptied shard of it (a tombstone in the change log, so that
// projections and clients forget it). An entry already gone is done; one
// that changed since (moved, frozen: an operator acted on it) is left as
// it is. When the control database does not answer, the removal is
// retried in the background like a failed creation's.
func (r *Router) unplacePurged(shard, ws string) {
	try := func(ctx context.Context) error {
		_, err := r.cfg.Catalogue.Unplace(ctx, ws, shard)
		switch parley.ErrorCode(err) {
		case "", parley.ENOTFOUND:
			r.m.purgedUnplaces.WithLabelValues(shard, "ok").Inc()
			r.log.Info("placement of a purged workspace removed", "workspace", ws, "shard", shard)
			return nil
		case parley.ECONFLICT:
			r.m.purgedUnplaces.WithLabelValues(shard, "kept").Inc()
			r.log.Warn("placement of a purged workspace changed since; left as it is", "workspace", ws, "shard", shard, "err", err)
			return nil
		}
		r.m.purgedUnplaces.WithLabelValues(shard, "retry").Inc()
		return fmt.Errorf("remove placement of purged workspace %s: %w", ws, err)
	}
	if err := r.attempt(try); err != nil {
		r.log.Warn("placement of a purged workspace not removed yet; retrying", "workspace", ws, "shard", shard, "err", err)
		r.later("unplace purged "+ws, try, func() {
			r.m.purgedUnplaces.WithLabelValues(shard, "gave_up").Inc()
			r.log.Error("placement of a purged workspace left in the directory", "workspace", ws, "shard", shard)
		})
	}
}

// later retries fn in the background, 1 s, 2 s, 4 s… up to about ten
// minutes in all, each attempt bounded by attemptTimeout, until it succeeds;
// then giveUp. It stops when the router closes. One retry runs per key:
// a call with a key being retried already is dropped (that retry does the
// same work). The catalogue's undos, the user copies' repairs and the
// bots' copies to the control database all retry through it.
func (r *Router) later(key string, fn func(context.Context) error, giveUp func()) {
	if _, busy := r.retrying.LoadOrStore(key, struct{}{}); busy {
		return
	}
	go func() {
		defer r.retrying.Delete(key)
		defer func() {
			if v := recover(); v != nil {
				r.log.Error("background retry panicked", "what", key, "panic", v)
			}
		}()
		for delay := time.Second; delay <= 5*time.Minute; delay *= 2 {
			select {
			case <-time.After(delay):
			case <-r.done:
				return
			}
			if r.attempt(fn) == nil {
				return
			}
		}
		giveUp()
	}()
}

// attempt runs fn once, bounded by attemptTimeout.
func (r *Router) attempt(fn func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), attemptTimeout)
	defer cancel()
	return fn(ctx)
}
