package sqlstore

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"parley"
)

// Workspace invites. A code is shown once, to its creator; the store keeps
// only its SHA-256, so a leaked table lets nobody in.

// maxInviteTTL bounds expires_in_s.
const maxInviteTTL = 30 * 24 * time.Hour

var inviteEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// newInviteCode returns a fresh code: 16 random bytes, lower-case base32.
func newInviteCode() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("new invite code: %w", err)
	}
	return strings.ToLower(inviteEncoding.EncodeToString(b)), nil
}

// hashInviteCode is the stored form of a code.
func hashInviteCode(code string) string {
	sum := sha256.Sum256([]byte(code))
	return hex.EncodeToString(sum[:])
}

// CreateInvite makes a multi-use code for the workspace. Any member but a
// guest may invite.
func (s *Store) CreateInvite(ctx context.Context, actor, workspaceID string, p parley.InviteParams) (*parley.Invite, error) {
	var out *parley.Invite
	caps := s.capsFor(ctx, workspaceID)
	err := s.write(ctx, "create invite", func(ctx context.Context, tx *Tx) error {
		role, err := workspaceRole(ctx, tx, workspaceID, actor)
		if err != nil {
			return err
		}
		if role == parley.RoleGuest {
			return parley.Errorf(parley.EFORBIDDEN, "guests may not invite")
		}
		if p.MaxUses < 0 {
			return parley.Errorf(parley.EINVALID, "max_uses must not be negative")
		}
		// The range is checked on the client's number, before it is
		// multiplied into a Duration: 2^40 seconds would overflow into an
		// invite that expired long ago.
		maxS := int(maxInviteTTL / time.Second)
		ttl := parley.DefaultInviteTTL
		switch {
		case p.ExpiresInS < 0 || p.ExpiresInS > maxS:
			return parley.Errorf(parley.EINVALID, "expires_in_s must be between 1 and %d", maxS)
		case p.ExpiresInS > 0:
			ttl = time.Duration(p.ExpiresInS) * time.Second
		}
		if err := checkInviteCap(ctx, tx, caps, workspaceID); err != nil {
			return err
		}
		code, err := newInviteCode()
		if err != nil {
			return err
		}
		now := tx.now
		inv := &parley.Invite{
			Code:        code,
			WorkspaceID: workspaceID,
			MaxUses:     p.MaxUses,
			ExpiresAt:   now.Add(ttl),
			CreatedBy:   actor,
			CreatedAt:   now,
		}
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO invites (workspace_id, code_hash, created_by, max_uses, uses, expires_at, created_at)
			 VALUES ($1, $2, $3, $4, 0, $5, $6)`,
			workspaceID, hashInviteCode(code), actor, p.MaxUses, micros(inv.ExpiresAt), micros(now)); err != nil {
			return fmt.Errorf("insert invite: %w", err)
		}
		out = inv
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// AcceptInvite adds actor to the invite's workspace as a member, spends one
// use, and joins them to #general. A member accepting again gets the
// workspace back and spends nothing.
func (s *Store) AcceptInvite(ctx context.Context, actor, code string) (*parley.Workspace, error) {
	hash := hashInviteCode(strings.ToLower(strings.TrimSpace(code)))
	gone := func() error { return parley.Errorf(parley.ENOTFOUND, "invite not found or expired") }
	var out *parley.Workspace
	// The invite's workspace, read first for its caps (an invite never
	// changes workspace); an unknown code gets no lookup and is refused
	// below.
	var caps parley.Caps
	var inviteWS string
	switch err := s.reads().QueryRowContext(ctx, `SELECT workspace_id FROM invites WHERE code_hash = $1`, hash).Scan(&inviteWS); {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return nil, fmt.Errorf("accept invite: load invite: %w", err)
	default:
		caps = s.capsFor(ctx, inviteWS)
	}
	err := s.write(ctx, "accept invite", func(ctx context.Context, tx *Tx) error {
		u, err := activeUser(ctx, tx, actor)
		if err != nil {
			return err
		}
		var workspaceID string
		var maxUses, uses, expires int64
		err = tx.QueryRowContext(ctx,
			`SELECT workspace_id, max_uses, uses, expires_at FROM invites WHERE code_hash = $1`, hash).
			Scan(&workspaceID, &maxUses, &uses, &expires)
		if errors.Is(err, sql.ErrNoRows) {
			return gone()
		}
		if err != nil {
			return fmt.Errorf("load invite: %w", err)
		}
		if expires <= micros(tx.now) || (maxUses > 0 && uses >= maxUses) {
			return gone()
		}
		if w, err := loadWorkspace(ctx, tx, actor, workspaceID); err == nil {
			out = w // already a member
			return nil
		} else if parley.ErrorCode(err) != parley.ENOTFOUND {
			return err
		}
		// The WHERE makes the last use safe against concurrent accepts.
		res, err := tx.ExecContext(ctx,
			`UPDATE invites SET uses = uses + 1 WHERE code_hash = $1 AND (max_uses = 0 OR uses < max_uses)`, hash)
		if err != nil {
			return fmt.Errorf("use invite: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return gone()
		}
		if err := tx.insertWorkspaceMember(ctx, workspaceID, u.ID, parley.RoleMember); err != nil {
			return err
		}
		if workspaceID != inviteWS {
			// Cannot happen: a code is drawn by the server and known to
			// a client only after its row committed, and an invite never
			// changes workspace. Refuse rather than skip the caps.
			return gone()
		}
		if err := checkWorkspaceMemberCap(ctx, tx, caps, workspaceID); err != nil {
			return err
		}
		joined, err := tx.joinGeneral(ctx, workspaceID, actor)
		if err != nil {
			return err
		}
		if err := tx.emitWorkspaceJoin(workspaceID, u, parley.RoleMember, joined); err != nil {
			return err
		}
		w, err := loadWorkspace(ctx, tx, actor, workspaceID)
		if err != nil {
			return err
		}
		out = w
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// InvitePreview names the workspace of a live invite. It reads only: the
// code is not spent. A used-up or expired code is as unknown as a wrong one.
func (s *Store) InvitePreview(ctx context.Context, code string) (*parley.InvitePreview, error) {
	hash := hashInviteCode(strings.ToLower(strings.TrimSpace(code)))
	var out parley.InvitePreview
	var maxUses, uses, expires int64
	err := s.rdb.QueryRowContext(ctx,
		`SELECT w.name, w.slug, i.max_uses, i.uses, i.expires_at
		   FROM invites i JOIN workspaces w ON w.id = i.workspace_id
		  WHERE i.code_hash = $1`, hash).
		Scan(&out.WorkspaceName, &out.WorkspaceSlug, &maxUses, &uses, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, parley.Errorf(parley.ENOTFOUND, "invite not found or expired")
	}
	if err != nil {
		return nil, fmt.Errorf("load invite preview: %w", err)
	}
	if expires <= micros(s.now()) || (maxUses > 0 && uses >= maxUses) {
		return nil, parley.Errorf(parley.ENOTFOUND, "invite not found or expired")
	}
	return &out, nil
}

// joinGeneral adds a newcomer to the workspace's #general, if it still
// exists as an active public channel, quietly: no member.joined goes to
// its members (everyone, in most workspaces); the workspace.member_joined
// that the admins and caches get carries the join.
func (tx *Tx) joinGeneral(ctx context.Context, workspaceID, userID string) ([]parley.JoinedChannel, error) {
	ch, err := scanChannel(tx.QueryRowContext(ctx, `SELECT `+channelColumns+channelFrom+`
		WHERE c.workspace_id = $2 AND c.name = $3 AND c.kind = $4
		  AND c.dm_key IS NULL AND c.archived_at IS NULL`,
		userID, workspaceID, generalChannel, string(parley.KindPublic)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load general channel: %w", err)
	}
	added, err := tx.insertMember(ctx, ch, userID, ch.LastSeq)
	if err != nil || !added {
		return nil, err
	}
	return []parley.JoinedChannel{{ChannelID: ch.ID, MemberCount: ch.MemberCount, LastSeq: ch.LastSeq}}, nil
}
