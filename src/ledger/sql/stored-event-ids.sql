-- The statement `storedEventIds` (src/ledger/sql/stored-event-ids.ts) for the schema "public",
-- as Postgres receives it. Generated: UPDATE_LEDGER_SQL=1 npx vitest run test/unit/ledger-sql.test.ts
select event_id from public.audit_event_ids where event_id = any($1::text[])
