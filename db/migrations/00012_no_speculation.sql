-- +goose Up
-- The store decides every page and every send on what it reads under its locks: no
-- statement checks a predicted state any more, so the settings the predicted page and the
-- predicted send recorded their verdicts in (migrations 00008 and 00009) are gone. The
-- unanswered_messages view of 00008 stays: the page commit reads its backlog through it.
DROP FUNCTION ilk_page_writes();
DROP FUNCTION ilk_send_writes();

-- +goose Down
CREATE FUNCTION ilk_page_writes() RETURNS boolean LANGUAGE sql STABLE
    AS $$ SELECT current_setting('ilinkflow.page_writes', true) IS DISTINCT FROM 'mispredicted' $$;
CREATE FUNCTION ilk_send_writes() RETURNS boolean LANGUAGE sql STABLE
    AS $$ SELECT current_setting('ilinkflow.send_writes', true) IS DISTINCT FROM 'mispredicted' $$;
