-- +goose Up
-- A send reserved and started in one round trip when its window's state is known.
--
-- store.ReserveAndStart keeps, per window, the state its last reservation on the window
-- left in this process: the rows it decided on (the window, its account, the agent
-- session, the session's message, the sealed secrets) and their version (SendState: the
-- rows' xmin and the message's next send index). The next send through that window and
-- session is decided on those rows, and its writes travel in one batch with the account's
-- and the window's locks and the statement that checks the version (SendState with
-- expected), COMMIT included. The check records its verdict in the transaction (the
-- setting ilinkflow.send_writes); every statement a reservation writes with
-- (ReserveWindowSend, ReserveStartedWindowSend, InsertSendAttempt, TouchLastSend) writes
-- only while ilk_send_writes() holds. A failed prediction commits nothing, without an
-- error, and the send is reserved the usual way: reads, then writes.

-- ilk_send_writes is false only in a transaction whose predicted send did not hold.
CREATE FUNCTION ilk_send_writes() RETURNS boolean LANGUAGE sql STABLE
    AS $$ SELECT current_setting('ilinkflow.send_writes', true) IS DISTINCT FROM 'mispredicted' $$;

-- +goose Down
DROP FUNCTION ilk_send_writes();
