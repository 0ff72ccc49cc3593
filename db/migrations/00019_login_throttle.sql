-- +goose Up
-- The web console's login throttle (docs/web-ui.md#logins-and-sessions), kept in the
-- database so that every worker behind a load balancer counts the same wrong operator
-- tokens: three workers give an attacker one budget, not three. Times are the database's
-- clock.
--
-- Each budget is a token bucket kept as one instant (GCRA): a bucket of `burst` tokens
-- that refills one token per `interval` (the console's rule, given by its caller) is full
-- again at full_at, so at `now` it holds burst - (full_at - now) / interval tokens, lets one
-- more wrong token in while full_at <= now + (burst - 1) * interval, and that token moves
-- full_at to greatest(full_at, now) + interval.
CREATE TABLE webui_login_throttle (
    -- 'address': the wrong tokens of one client address; 'all': the one row that counts
    -- them over all addresses together (the ceiling), whose client_address is ''.
    scope           text        NOT NULL CHECK (scope IN ('address', 'all')),
    -- The address as the console counts it: an IPv4 address, an IPv6 /64, or what the
    -- trusted proxy's header named (its SHA-256 when that is long or not plain text).
    client_address  text        NOT NULL CHECK (octet_length(client_address) <= 100),
    -- When this bucket is full again (see above).
    full_at         timestamptz NOT NULL,
    -- For an address: when it is forgotten, a whole bucket's refill after its last wrong
    -- token. Until then it counts as an address that failed before, which the ceiling
    -- holds back; after it the row counts as absent (the address is clean again) and a
    -- later write deletes it. NULL for the ceiling, which is never forgotten.
    forget_at       timestamptz,
    PRIMARY KEY (scope, client_address),
    CHECK ((scope = 'all') = (forget_at IS NULL)),
    CHECK (forget_at >= full_at),
    CHECK (scope = 'address' OR client_address = '')
);
-- The remembered addresses (how many, for the bound on them) and the forgotten ones (to
-- delete them a few at a time).
CREATE INDEX webui_login_throttle_forget ON webui_login_throttle (forget_at) WHERE scope = 'address';

-- +goose Down
DROP TABLE webui_login_throttle;
