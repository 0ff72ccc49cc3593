package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/client"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/wfclient"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// demoOwner is the WeChat user who owns the `starter dev` demo bot, the same on every run.
const demoOwner = "o9cq8demo-newcomer@im.wechat"

// defaultDevKeyFile is where `starter dev` keeps its sealing key between runs:
// <user config dir>/ilinkflow/dev-sealing-key, or .ilinkflow-dev-key in the working
// directory when there is no user config dir.
func defaultDevKeyFile() string {
	dir, err := os.UserConfigDir()
	if err != nil || dir == "" {
		return ".ilinkflow-dev-key"
	}
	return filepath.Join(dir, "ilinkflow", "dev-sealing-key")
}

// devKeyring reads the dev-only sealing key from path, creating the file (mode 0600, its
// directory 0700) with a fresh key when it does not exist. created reports a new file.
func devKeyring(path string) (keys *sealing.Keyring, created bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		spec, gerr := sealing.GenerateKeySpec(1)
		if gerr != nil {
			return nil, false, gerr
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, false, fmt.Errorf("dev key file: %w", err)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			return devKeyring(path) // another run created it first
		}
		if err != nil {
			return nil, false, fmt.Errorf("dev key file: %w", err)
		}
		if _, err := f.WriteString(spec + "\n"); err != nil {
			f.Close()
			return nil, false, fmt.Errorf("dev key file %s: %w", path, err)
		}
		if err := f.Close(); err != nil {
			return nil, false, fmt.Errorf("dev key file %s: %w", path, err)
		}
		keys, err := sealing.ParseKeyring(spec)
		return keys, true, err
	}
	if err != nil {
		return nil, false, fmt.Errorf("dev key file: %w", err)
	}
	if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o077 != 0 {
		return nil, false, fmt.Errorf("dev key file %s is readable by others (mode %v): chmod 600 it", path, st.Mode().Perm())
	}
	keys, err = sealing.ParseKeyring(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, false, fmt.Errorf("dev key file %s: %w (delete it to start over with a fresh key and a fresh database)", path, err)
	}
	return keys, false, nil
}

// retirePreviousDemoAccounts marks the demo owner's accounts that an earlier run left
// active or paused as needing a relogin, before this run's worker starts, and returns
// them: the simulator that issued their bot tokens ended with that run, so their tokens
// are dead, and a worker that polled them would only learn it from a stale-token error
// (warnings on every second run). Their open windows are cancelled with them. On a
// Temporal server that outlived the earlier run (dev connected to one), their poller is
// terminated and their windows' workflows are told they retired: a poller told to stop
// would say goodbye (notifystop) to the simulator that is gone. On a database that is
// not migrated yet (a first run: the worker migrates it) there is none.
func retirePreviousDemoAccounts(ctx context.Context, pool *pgxpool.Pool, keys *sealing.Keyring, tc client.Client, owner string) ([]string, error) {
	prev := previousDemoAccounts(ctx, pool, owner)
	if len(prev) == 0 {
		return nil, nil
	}
	st, err := store.New(pool, keys, store.DefaultLimits())
	if err != nil {
		return nil, err
	}
	inst, err := st.Installation(ctx)
	if err != nil {
		return nil, err
	}
	const reason = "starter dev: the simulator that issued its bot token ended with the previous run"
	for _, key := range prev {
		a, err := st.GetAccount(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("the previous run's demo account %s: %w", key, err)
		}
		ch, err := st.MarkNeedsRelogin(ctx, time.Now(), key, a.Generation, reason)
		if err != nil {
			return nil, fmt.Errorf("the previous run's demo account %s: %w", key, err)
		}
		id, runID, err := wfclient.RunningPoller(ctx, tc, inst, key)
		if err != nil {
			return nil, fmt.Errorf("the previous run's demo account %s: %w", key, err)
		}
		if id != "" {
			if err := tc.TerminateWorkflow(ctx, id, runID, reason); err != nil && !wfclient.IsNotFound(err) {
				return nil, fmt.Errorf("the previous run's demo account %s: terminate its poller: %w", key, err)
			}
		}
		for _, w := range ch.CancelledWindowIDs {
			_ = tc.SignalWorkflow(ctx, inst.WindowWorkflowID(w), "", wfapi.SignalRetired, nil) // best effort, as operator.Steer
		}
	}
	return prev, nil
}

// previousDemoAccounts lists the demo owner's active or paused accounts left by an earlier
// run (none when the accounts cannot be read, e.g. on a database not migrated yet).
func previousDemoAccounts(ctx context.Context, pool *pgxpool.Pool, owner string) []string {
	rows, err := pool.Query(ctx, "SELECT account_key FROM accounts WHERE owner_peer_id = $1 AND status IN ('active', 'paused') ORDER BY account_key", owner)
	if err != nil {
		return nil
	}
	defer rows.Close()
	var keys []string
	for rows.Next() {
		var k string
		if rows.Scan(&k) == nil {
			keys = append(keys, k)
		}
	}
	return keys
}
