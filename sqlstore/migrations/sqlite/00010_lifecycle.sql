-- +goose Up
-- Account and workspace lifecycle (docs/lifecycle.md). users.deactivated_at
-- has been in the schema since 00001 (sessions and logins already refuse
-- deactivated accounts); this adds what deleting a workspace needs: the
-- moment it was deleted. A deleted workspace has no members, invites or
-- slug any more; its remaining rows are removed in batches by the purge,
-- which a restarted node resumes from this column.
ALTER TABLE workspaces ADD COLUMN deleted_at INTEGER;
CREATE INDEX workspaces_deleted ON workspaces(deleted_at) WHERE deleted_at IS NOT NULL;

-- +goose Down
DROP INDEX workspaces_deleted;
ALTER TABLE workspaces DROP COLUMN deleted_at;
