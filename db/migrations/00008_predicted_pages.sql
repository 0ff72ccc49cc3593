-- +goose Up
-- A page commit in one round trip when the conversation's state is known.
--
-- store.CommitPage predicts what a page is decided on (the account's cursor and
-- generation, the conversation's open window, nothing unanswered, no message of the page
-- stored yet) from the account's last commit in the same process, and sends the writes
-- decided from that prediction in one batch with the statement that checks it
-- (ExpectPredictedPage), COMMIT included. The check runs after the account and the open
-- window are locked and records its verdict in the transaction (the setting
-- ilinkflow.page_writes); every statement a page commit writes with (the cursor's
-- compare-and-set, RetireWindows, InsertPageMessages, InsertInboundImages, AbsorbMessages,
-- DeleteImagesOfMessages) writes only while ilk_page_writes() holds. A failed prediction
-- commits nothing, without an error (an error would make the driver drop every prepared
-- statement of the batch), and the store commits the page the usual way: reads, then
-- writes.
--
-- unanswered_messages is the backlog of every conversation, written once for the three
-- statements that read it (ReceivedBacklog, ReceivedBacklogImages, ExpectPredictedPage):
-- the messages not yet handed to an agent, and the open window's message when it was
-- handed out but no reply of it was transmitted. The window's message is looked up by its
-- key in a subquery of its own (OFFSET 0): planned as a join, the lookup was a scan of the
-- whole inbox while the inbox was small, and that plan stayed cached as it grew.
CREATE VIEW unanswered_messages AS
SELECT received.account_key::text AS account_key, received.peer_id::text AS peer_id,
       received.message_key::text AS message_key, received.inbox_seq, received.payload,
       received.status::text AS status
FROM inbound_messages AS received
WHERE received.status = 'received'
UNION ALL
SELECT unanswered.account_key::text, unanswered.peer_id::text, handed.message_key::text, handed.inbox_seq,
       handed.payload, handed.status::text
FROM reply_windows AS unanswered
CROSS JOIN LATERAL (
    SELECT message.message_key, message.inbox_seq, message.payload, message.status
    FROM inbound_messages AS message
    WHERE message.message_key = unanswered.source_message_key AND message.status = 'processing'
    OFFSET 0
) AS handed
WHERE unanswered.state = 'open' AND unanswered.transmitted = 0;

-- ilk_page_writes is false only in a transaction whose predicted page did not hold.
CREATE FUNCTION ilk_page_writes() RETURNS boolean LANGUAGE sql STABLE
    AS $$ SELECT current_setting('ilinkflow.page_writes', true) IS DISTINCT FROM 'mispredicted' $$;

-- +goose Down
DROP FUNCTION ilk_page_writes();
DROP VIEW unanswered_messages;
