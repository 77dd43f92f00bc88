-- +goose Up
-- A placed workspace's slug, reserved in Place's transaction: two
-- creations of one slug on two shards conflict here. NULL for entries
-- placed by id alone (parley workspaces place, placements made before
-- this column) and once the workspace is deleted (its slug is free).
ALTER TABLE tenantdir_workspaces ADD COLUMN slug TEXT;
CREATE UNIQUE INDEX tenantdir_workspaces_slug ON tenantdir_workspaces (slug);

-- +goose Down
DROP INDEX tenantdir_workspaces_slug;
ALTER TABLE tenantdir_workspaces DROP COLUMN slug;
