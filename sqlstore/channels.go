package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"parley"
)

// Public and private channels: creation, reads, renames and archiving. DMs
// are opened in dms.go; memberships and read markers live in members.go.

// CreateChannel creates a public or private channel with actor as its first
// member. Guests may not create channels.
func (s *Store) CreateChannel(ctx context.Context, actor, workspaceID string, nc parley.NewChannel) (*parley.Channel, error) {
	var ch *parley.Channel
	caps := s.capsFor(ctx, workspaceID)
	err := s.write(ctx, "create channel", func(ctx context.Context, tx *Tx) error {
		role, err := workspaceRole(ctx, tx, workspaceID, actor)
		if err != nil {
			return err
		}
		if role == parley.RoleGuest {
			return parley.Errorf(parley.EFORBIDDEN, "guests cannot create channels")
		}
		if err := validateNewChannel(nc); err != nil {
			return err
		}
		if err := checkChannelCap(ctx, tx, caps, workspaceID); err != nil {
			return err
		}
		if err := checkNameFree(ctx, tx, workspaceID, nc.Name, ""); err != nil {
			return err
		}
		ch, err = tx.createChannel(ctx, newChannel{
			workspaceID: workspaceID,
			name:        nc.Name,
			kind:        nc.Kind,
			topic:       nc.Topic,
			purpose:     nc.Purpose,
			creator:     actor,
			members:     []string{actor},
		})
		if err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ch, nil
}

func validateNewChannel(nc parley.NewChannel) error {
	switch nc.Kind {
	case parley.KindPublic, parley.KindPrivate:
	case parley.KindDM, parley.KindGroupDM:
		return parley.Errorf(parley.EINVALID, "direct messages are opened with POST /dms, not created as channels")
	default:
		return parley.Errorf(parley.EINVALID, "kind must be %q or %q", parley.KindPublic, parley.KindPrivate)
	}
	if err := parley.ValidateChannelName(nc.Name); err != nil {
		return err
	}
	if err := parley.ValidateText("topic", nc.Topic, parley.MaxTopicLen); err != nil {
		return err
	}
	return parley.ValidateText("purpose", nc.Purpose, parley.MaxPurposeLen)
}

// checkNameFree returns ECONFLICT when another public or private channel of
// the workspace (archived ones included) already has the name. The unique
// index channels_name is the backstop for races.
func checkNameFree(ctx context.Context, q querier, workspaceID, name, exceptID string) error {
	var id string
	err := q.QueryRowContext(ctx,
		`SELECT id FROM channels WHERE workspace_id = $1 AND name = $2 AND dm_key IS NULL AND id <> $3`,
		workspaceID, name, exceptID).Scan(&id)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return fmt.Errorf("check channel name: %w", err)
	}
	return parley.Errorf(parley.ECONFLICT, "a channel named %q already exists", name)
}

// GetChannel returns the channel as actor sees it.
func (s *Store) GetChannel(ctx context.Context, actor, channelID string) (*parley.Channel, error) {
	a, err := loadChannel(ctx, s.rdb, actor, channelID)
	if err != nil {
		return nil, err
	}
	if err := fillCounts(ctx, s.reads(), actor, a.ch); err != nil {
		return nil, err
	}
	return a.ch, nil
}

// UpdateChannel changes a channel's name, topic or purpose. Members may set
// the topic and purpose; renaming needs channel management rights.
func (s *Store) UpdateChannel(ctx context.Context, actor, channelID string, p parley.ChannelPatch) (*parley.Channel, error) {
	var out *parley.Channel
	err := s.writeChannel(ctx, "update channel", channelID, func(ctx context.Context, tx *Tx) error {
		a, err := loadChannel(ctx, tx, actor, channelID)
		if err != nil {
			return err
		}
		if err := a.requireMember(); err != nil {
			return err
		}
		if err := a.requireActive(); err != nil {
			return err
		}
		ch := a.ch
		changed := false
		if p.Name != nil && *p.Name != ch.Name {
			if ch.Kind.IsDM() {
				return parley.Errorf(parley.EINVALID, "direct messages have no name")
			}
			if !a.canManage(actor) {
				return parley.Errorf(parley.EFORBIDDEN, "only workspace admins and the channel's creator may rename it")
			}
			if err := parley.ValidateChannelName(*p.Name); err != nil {
				return err
			}
			if err := checkNameFree(ctx, tx, ch.WorkspaceID, *p.Name, ch.ID); err != nil {
				return err
			}
			ch.Name, changed = *p.Name, true
		}
		if p.Topic != nil && *p.Topic != ch.Topic {
			if err := parley.ValidateText("topic", *p.Topic, parley.MaxTopicLen); err != nil {
				return err
			}
			ch.Topic, changed = *p.Topic, true
		}
		if p.Purpose != nil && *p.Purpose != ch.Purpose {
			if err := parley.ValidateText("purpose", *p.Purpose, parley.MaxPurposeLen); err != nil {
				return err
			}
			ch.Purpose, changed = *p.Purpose, true
		}
		limChanged, err := patchPostLimits(a, actor, p)
		if err != nil {
			return err
		}
		changed = changed || limChanged
		if !changed {
			out = ch
			return nil
		}
		if _, err := tx.ExecContext(ctx,
			`UPDATE channels SET name = $1, topic = $2, purpose = $3, updated_at = $4,
			   slow_mode_seconds = $5, post_limit_per_minute = $6
			 WHERE workspace_id = $7 AND id = $8`,
			ch.Name, ch.Topic, ch.Purpose, micros(tx.now), ch.SlowModeSeconds, ch.PostLimitPerMinute,
			ch.WorkspaceID, ch.ID); err != nil {
			if isUniqueViolation(err) {
				return parley.Errorf(parley.ECONFLICT, "a channel named %q already exists", ch.Name)
			}
			return fmt.Errorf("update channel: %w", err)
		}
		if err := tx.appendChannelEvent(ctx, ch, parley.EventChannelUpdated, actor); err != nil {
			return err
		}
		out = ch
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ArchiveChannel archives a public or private channel. Archiving twice
// returns the channel unchanged.
func (s *Store) ArchiveChannel(ctx context.Context, actor, channelID string) (*parley.Channel, error) {
	var out *parley.Channel
	err := s.writeChannel(ctx, "archive channel", channelID, func(ctx context.Context, tx *Tx) error {
		a, err := loadChannel(ctx, tx, actor, channelID)
		if err != nil {
			return err
		}
		ch := a.ch
		if ch.Kind.IsDM() {
			return parley.Errorf(parley.EINVALID, "direct messages cannot be archived")
		}
		if !a.canManage(actor) {
			return parley.Errorf(parley.EFORBIDDEN, "only workspace admins and the channel's creator may archive it")
		}
		if ch.ArchivedAt != nil {
			out = ch
			return nil
		}
		if _, err := tx.ExecContext(ctx,
			`UPDATE channels SET archived_at = $1 WHERE workspace_id = $2 AND id = $3`,
			micros(tx.now), ch.WorkspaceID, ch.ID); err != nil {
			return fmt.Errorf("archive channel: %w", err)
		}
		at := tx.now
		ch.ArchivedAt = &at
		if err := tx.appendChannelEvent(ctx, ch, parley.EventChannelArchived, actor); err != nil {
			return err
		}
		out = ch
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// appendChannelEvent appends a channel lifecycle event (channel.updated,
// channel.archived) whose payload is the channel itself, and updates ch's
// seq and time in place. The payload is the same for every reader, so it
// carries no membership; private channels and DMs announce it to each
// member's user topic too, public ones only on their own topic (and the
// directory's, for the caches).
func (tx *Tx) appendChannelEvent(ctx context.Context, ch *parley.Channel, typ, actor string) error {
	var members []string
	if ch.Kind != parley.KindPublic {
		var err error
		if members, err = channelMemberIDs(ctx, tx, ch.WorkspaceID, ch.ID); err != nil {
			return err
		}
	}
	seq, err := tx.appendEvent(ctx, ch.WorkspaceID, ch.ID, typ, func(seq int64) any {
		c := *ch
		c.LastSeq, c.UpdatedAt = seq, tx.now
		c.IsMember, c.LastReadSeq = false, 0
		return parley.ChannelEventData{ChannelID: ch.ID, Seq: seq, Channel: &c, UserID: actor}
	}, userTopics(members)...)
	if err != nil {
		return err
	}
	ch.LastSeq, ch.UpdatedAt = seq, tx.now
	return nil
}

// channelMemberIDs lists a channel's members, sorted.
func channelMemberIDs(ctx context.Context, q querier, workspaceID, channelID string) ([]string, error) {
	rows, err := q.QueryContext(ctx,
		`SELECT user_id FROM channel_members WHERE workspace_id = $1 AND channel_id = $2 ORDER BY user_id`,
		workspaceID, channelID)
	if err != nil {
		return nil, fmt.Errorf("list channel members: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("scan channel member: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list channel members: %w", err)
	}
	return ids, nil
}

// ListChannels is the channel browser: the workspace's channels that actor
// can see, by name, archived ones included (marked by archived_at).
func (s *Store) ListChannels(ctx context.Context, actor, workspaceID string, q parley.ChannelQuery) (*parley.ChannelPage, error) {
	role, err := workspaceRole(ctx, s.rdb, workspaceID, actor)
	if err != nil {
		return nil, err
	}
	after, err := decodeCursor(q.Cursor)
	if err != nil {
		return nil, err
	}
	limit := parley.ClampLimit(q.Limit)
	// Guests see only their own channels; others also every public one.
	visible := `m.user_id IS NOT NULL OR (c.kind = 'public' AND $4 = 0)`
	guest := 0
	if role == parley.RoleGuest {
		guest = 1
	}
	prefix := escapeLike(strings.ToLower(strings.TrimPrefix(strings.TrimSpace(q.Q), "#"))) + "%"
	rows, err := s.rdb.QueryContext(ctx, `SELECT `+channelColumns+channelFrom+`
		WHERE c.workspace_id = $2 AND c.dm_key IS NULL AND c.name > $3 AND (`+visible+`)
		  AND c.name LIKE $5 ESCAPE '\'
		ORDER BY c.name LIMIT $6`, actor, workspaceID, after, guest, prefix, limit+1)
	if err != nil {
		return nil, fmt.Errorf("list channels: %w", err)
	}
	defer rows.Close()
	page := &parley.ChannelPage{Channels: []parley.Channel{}}
	for rows.Next() {
		ch, err := scanChannel(rows)
		if err != nil {
			return nil, fmt.Errorf("list channels: %w", err)
		}
		page.Channels = append(page.Channels, *ch)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list channels: %w", err)
	}
	if len(page.Channels) > limit {
		page.Channels = page.Channels[:limit]
		page.NextCursor = encodeCursor(page.Channels[limit-1].Name)
	}
	return page, nil
}
