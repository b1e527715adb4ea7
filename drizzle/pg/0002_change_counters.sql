CREATE TABLE "change_counters" (
	"name" text PRIMARY KEY NOT NULL,
	"version" bigint NOT NULL
);
--> statement-breakpoint
-- Processes that cache verified keys poll change_counters' `keys` row (src/auth/key-verifier.ts):
-- it moves in the same transaction as any change to what a cached key carries, whoever makes it
-- (this replica, another one, the CLI, psql). last_used_at and names are left out: they change
-- nothing the request path decides on.
CREATE FUNCTION modelgate_keys_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO change_counters (name, version) VALUES ('keys', 1)
		ON CONFLICT (name) DO UPDATE SET version = change_counters.version + 1;
	RETURN NULL;
END;
$$;
--> statement-breakpoint
CREATE TRIGGER api_keys_changed AFTER UPDATE OF user_id, key_hash, per_minute, models, budget_micro, budget_period, tokens_per_minute, allow_ips, expires_at, revoked_at OR DELETE ON api_keys
	FOR EACH STATEMENT EXECUTE FUNCTION modelgate_keys_changed();
--> statement-breakpoint
CREATE TRIGGER users_disabled_changed AFTER UPDATE OF disabled_at OR DELETE ON users
	FOR EACH STATEMENT EXECUTE FUNCTION modelgate_keys_changed();
