package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/ilinkflow/ilinkflow/internal/ilinksim"
	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/internal/store/storetest"
	"github.com/ilinkflow/ilinkflow/internal/testkit"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// upgradeDevArgs make a rolling upgrade observable in a test's time: the server suggests
// continue-as-new after 40 events (a poller continues as new every few poll sessions),
// and it re-reads a draining version's open pinned workflows every 2 s (the default is
// 3 minutes, after a grace period of 3 minutes).
var upgradeDevArgs = []string{
	"--dynamic-config-value", "limit.historyCount.suggestContinueAsNew=40",
	"--dynamic-config-value", `matching.wv.VersionDrainageStatusRefreshInterval="2s"`,
	"--dynamic-config-value", `matching.wv.VersionDrainageStatusVisibilityGracePeriod="2s"`,
}

// versionOf is the build id and behaviour of the Worker Deployment Version that last ran
// a workflow task of the workflow's current run, and its run id.
func versionOf(ctx context.Context, tc client.Client, workflowID string) (build string, behavior enumspb.VersioningBehavior, runID string, status enumspb.WorkflowExecutionStatus, err error) {
	d, err := tc.DescribeWorkflow(ctx, workflowID, "")
	if err != nil {
		return "", 0, "", 0, err
	}
	info := d.RawResponse.GetWorkflowExecutionInfo()
	vi := info.GetVersioningInfo()
	return vi.GetDeploymentVersion().GetBuildId(), vi.GetBehavior(), info.GetExecution().GetRunId(), info.GetStatus(), nil
}

// chatter sends each bot a message, waits for the echo agent's answer, and sends the next
// one, until stopped: messages flow through the whole upgrade, one at a time per bot so
// that each answer is its message's own (none is merged into the next delivery).
type chatter struct {
	r    *procRig
	mu   sync.Mutex
	sent map[string][]string // bot id → texts sent
	lost []string            // texts not answered within the bound
	stop chan struct{}
	wg   sync.WaitGroup
}

func startChatter(r *procRig, bots []ilinksim.BotInfo) *chatter {
	c := &chatter{r: r, sent: map[string][]string{}, stop: make(chan struct{})}
	for _, b := range bots {
		c.wg.Add(1)
		go c.talk(b)
	}
	return c
}

func (c *chatter) talk(bot ilinksim.BotInfo) {
	defer c.wg.Done()
	for i := 1; ; i++ {
		select {
		case <-c.stop:
			return
		default:
		}
		text := fmt.Sprintf("%s message %d", bot.BotID[:8], i)
		if _, err := c.r.ctl.InjectText(c.r.ctx, bot.BotID, "", text); err != nil {
			c.fail(text + ": " + err.Error())
			return
		}
		c.mu.Lock()
		c.sent[bot.BotID] = append(c.sent[bot.BotID], text)
		c.mu.Unlock()
		if !c.answered(bot.BotID, text, 2*time.Minute) {
			c.fail(text)
		}
	}
}

// answered waits for the echo of text.
func (c *chatter) answered(botID, text string, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		sent, err := c.r.ctl.Sent(c.r.ctx, botID)
		if err == nil {
			for _, m := range sent {
				if m.Text == "echo: "+text {
					return true
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

func (c *chatter) fail(what string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lost = append(c.lost, what)
}

// finish stops the flow after each bot's current message is answered.
func (c *chatter) finish() {
	close(c.stop)
	c.wg.Wait()
}

// TestRollingUpgradeWithWorkerVersioningMovesPollersAndDrainsWindowsOnTheOldVersion runs
// two Worker Deployment Versions of the real worker binary (the same binary with another
// build id). Three bots poll and their windows are open on v1; v2 starts and becomes the
// current version. Every poller is then served by v2 after its next continue-as-new (it is
// AutoUpgrade); every window opened before the switch finishes on v1 (Pinned); new
// windows open on v2; v1 is reported drained and stops. Messages flow all along: none is
// lost, doubled or left unhandled.
func TestRollingUpgradeWithWorkerVersioningMovesPollersAndDrainsWindowsOnTheOldVersion(t *testing.T) {
	t.Parallel()
	limits := store.DefaultLimits()
	limits.WindowLifetime = 2 * time.Minute
	r := newProcRigWith(t, 300*time.Millisecond, limits, procRigOptions{DevArgs: upgradeDevArgs})
	ctx := r.ctx
	bots := []ilinksim.BotInfo{r.bot}
	accounts := []store.Account{r.acct}
	for range 3 {
		bot, err := r.ctl.CreateBot(ctx, ilinksim.CreateBotRequest{})
		if err != nil {
			t.Fatal(err)
		}
		acct, err := storetest.RegisterAccount(ctx, r.store, time.Now(), store.ConfirmInput{ProviderAccountID: bot.BotID,
			OwnerPeerID: bot.Owner, BaseURL: r.srv.URL, BotToken: sealing.NewSecret(bot.Token)})
		if err != nil {
			t.Fatal(err)
		}
		bots, accounts = append(bots, bot), append(accounts, acct)
	}
	const deployment = "ilinkflow"
	env := func(build string) []string {
		return r.baseEnv(map[string]string{
			"ILINKFLOW_HANDLER":         "echo",
			"ILINKFLOW_SEND_GAP":        "5ms",
			"ILINKFLOW_POLL_SESSION":    "2s",
			"ILINKFLOW_HEARTBEAT":       "1s",
			"ILINKFLOW_WINDOW_LIFETIME": limits.WindowLifetime.String(),
			"TEMPORAL_CONFIG_FILE":      emptyConfigFile,
			"TEMPORAL_DEPLOYMENT_NAME":  deployment,
			"TEMPORAL_WORKER_BUILD_ID":  build,
		})
	}
	dh := r.tc.WorkerDeploymentClient().GetHandle(deployment)
	setCurrent := func(build string) {
		t.Helper()
		// The version exists once its worker polls the task queue.
		testkit.Eventually(t, "set the current version to "+build, 2*time.Minute, func() (bool, error) {
			_, err := dh.SetCurrentVersion(ctx, client.WorkerDeploymentSetCurrentVersionOptions{BuildID: build})
			return err == nil, err
		})
	}
	on := func(workflowID, build string, behavior enumspb.VersioningBehavior) func() (bool, error) {
		return func() (bool, error) {
			b, beh, _, _, err := versionOf(ctx, r.tc, workflowID)
			if err != nil || b != build || beh != behavior {
				return false, fmt.Errorf("%s on %q (%v), %v", workflowID, b, beh, err)
			}
			return true, nil
		}
	}

	// v1: the first version, made current as an operator does after its first start.
	v1 := startProc(t, "worker v1", r.bin, env("v1"))
	v1.waitLog(t, workerReady, 3*time.Minute)
	setCurrent("v1")
	for _, a := range accounts {
		testkit.Eventually(t, "poller on v1", 2*time.Minute, on(r.pollerWF(a.AccountKey), "v1", enumspb.VERSIONING_BEHAVIOR_AUTO_UPGRADE))
	}
	// Three bots chat all along; the fourth gets one message before the switch and one
	// after, so its first window stays open on v1 across the switch.
	quiet := bots[3]
	chat := startChatter(r, bots[:3])
	stopped := false
	defer func() {
		if !stopped {
			chat.finish()
		}
	}()
	// A window open on v1 for every chatting bot.
	for _, a := range accounts[:3] {
		testkit.Eventually(t, "a window open on v1", 2*time.Minute, func() (bool, error) {
			open, err := r.store.ListWindows(ctx, store.WindowFilter{AccountKey: a.AccountKey, State: vocab.WindowOpen})
			if err != nil || len(open) == 0 {
				return false, err
			}
			return on(r.windowWF(open[0].ReplyWindowID), "v1", enumspb.VERSIONING_BEHAVIOR_PINNED)()
		})
	}

	// v2: the same binary with another build id; it becomes current.
	v2 := startProc(t, "worker v2", r.bin, env("v2"))
	v2.waitLog(t, workerReady, 3*time.Minute)
	// The windows open on v1 as the switch comes: the quiet bot's, and the chatting bots'
	// (each has its last message's, unless the next message just superseded it).
	if _, err := r.ctl.InjectText(ctx, quiet.BotID, "", "quiet before"); err != nil {
		t.Fatal(err)
	}
	if !chat.answered(quiet.BotID, "quiet before", 2*time.Minute) {
		t.Fatal("the quiet bot's message before the switch was not answered")
	}
	var quietWindow string
	testkit.Eventually(t, "the quiet bot's window open on v1", 2*time.Minute, func() (bool, error) {
		open, err := r.store.ListWindows(ctx, store.WindowFilter{AccountKey: accounts[3].AccountKey, State: vocab.WindowOpen})
		if err != nil || len(open) == 0 {
			return false, err
		}
		quietWindow = r.windowWF(open[0].ReplyWindowID)
		return on(quietWindow, "v1", enumspb.VERSIONING_BEHAVIOR_PINNED)()
	})
	v1Windows := []string{quietWindow}
	for _, a := range accounts[:3] {
		open, err := r.store.ListWindows(ctx, store.WindowFilter{AccountKey: a.AccountKey, State: vocab.WindowOpen})
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range open {
			id := r.windowWF(w.ReplyWindowID)
			if b, beh, _, st, err := versionOf(ctx, r.tc, id); err == nil && b == "v1" && beh == enumspb.VERSIONING_BEHAVIOR_PINNED &&
				st == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				v1Windows = append(v1Windows, id)
			}
		}
	}
	runAtSwitch := map[string]string{}
	for _, a := range accounts {
		_, _, run, _, err := versionOf(ctx, r.tc, r.pollerWF(a.AccountKey))
		if err != nil {
			t.Fatal(err)
		}
		runAtSwitch[a.AccountKey] = run
	}
	setCurrent("v2")
	switched := time.Now()

	// Every poller is served by v2 in a run that began after the switch.
	for _, a := range accounts {
		id := r.pollerWF(a.AccountKey)
		testkit.Eventually(t, "poller continued as new on v2", 3*time.Minute, func() (bool, error) {
			b, beh, run, _, err := versionOf(ctx, r.tc, id)
			if err != nil || run == runAtSwitch[a.AccountKey] || b != "v2" || beh != enumspb.VERSIONING_BEHAVIOR_AUTO_UPGRADE {
				return false, fmt.Errorf("poller run %s on %q (%v), %v", run, b, beh, err)
			}
			return true, nil
		})
	}
	t.Logf("every poller continued as new on v2 within %v of the switch", time.Since(switched).Round(time.Second))
	if _, err := r.ctl.InjectText(ctx, quiet.BotID, "", "quiet after"); err != nil {
		t.Fatal(err)
	}
	if !chat.answered(quiet.BotID, "quiet after", 2*time.Minute) {
		t.Fatal("the quiet bot's message after the switch was not answered")
	}
	// The windows opened before the switch finish on v1.
	for _, id := range v1Windows {
		testkit.Eventually(t, "a window of v1 finished on v1", limits.WindowLifetime+2*time.Minute, func() (bool, error) {
			b, beh, _, st, err := versionOf(ctx, r.tc, id)
			if err != nil || st == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				return false, err
			}
			if st != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED || b != "v1" || beh != enumspb.VERSIONING_BEHAVIOR_PINNED {
				return false, fmt.Errorf("window %s ended %v on %q (%v), want completed on v1 pinned", id, st, b, beh)
			}
			return true, nil
		})
	}
	// Windows opened since are pinned to v2.
	for _, a := range accounts {
		testkit.Eventually(t, "a window open on v2", 2*time.Minute, func() (bool, error) {
			open, err := r.store.ListWindows(ctx, store.WindowFilter{AccountKey: a.AccountKey, State: vocab.WindowOpen})
			if err != nil || len(open) == 0 {
				return false, err
			}
			return on(r.windowWF(open[0].ReplyWindowID), "v2", enumspb.VERSIONING_BEHAVIOR_PINNED)()
		})
	}
	// v1 is drained (no open workflow pinned to it), then stops.
	testkit.Eventually(t, "v1 drained", 3*time.Minute, func() (bool, error) {
		d, err := dh.DescribeVersion(ctx, client.WorkerDeploymentDescribeVersionOptions{BuildID: "v1"})
		if err != nil {
			return false, err
		}
		di := d.Info.DrainageInfo
		if di == nil {
			return false, errors.New("no drainage information yet")
		}
		return di.DrainageStatus == client.WorkerDeploymentVersionDrainageStatusDrained, fmt.Errorf("drainage status %v", di.DrainageStatus)
	})
	t.Logf("v1 drained %v after the switch", time.Since(switched).Round(time.Second))
	v1.stop()
	var exit *exec.ExitError
	if errors.As(v1.exitErr, &exit) {
		t.Fatalf("v1 exited %v after SIGTERM, want 0", v1.exitErr)
	}
	// Messages go on through v2 alone for a while.
	after := chatCount(chat)
	testkit.Eventually(t, "messages answered by v2 alone", 2*time.Minute, func() (bool, error) {
		return chatCount(chat) >= after+2*len(bots), nil
	})
	chat.finish()
	stopped = true

	// 0 lost, 0 doubled, 0 stuck.
	if len(chat.lost) > 0 {
		t.Fatalf("%d messages not answered within 2 minutes: %v", len(chat.lost), chat.lost)
	}
	chat.sent[quiet.BotID] = []string{"quiet before", "quiet after"}
	total := 0
	for _, b := range bots {
		sent, err := r.ctl.Sent(ctx, b.BotID)
		if err != nil {
			t.Fatal(err)
		}
		echoes := map[string]int{}
		for _, m := range sent {
			echoes[m.Text]++
		}
		for _, text := range chat.sent[b.BotID] {
			if n := echoes["echo: "+text]; n != 1 {
				t.Fatalf("%q was answered %d times, want once", text, n)
			}
			total++
		}
	}
	// Each message is finished just after its answer is sent.
	testkit.Eventually(t, "every message handled", time.Minute, func() (bool, error) {
		var notHandled int
		err := r.pool.QueryRow(ctx, "SELECT count(*) FROM inbound_messages WHERE status NOT IN ('handled', 'absorbed')").Scan(&notHandled)
		if err == nil && notHandled != 0 {
			err = fmt.Errorf("%d messages not handled", notHandled)
		}
		return err == nil, err
	})
	if !strings.Contains(v2.out.String(), "deployment=ilinkflow build_id=v2") {
		t.Fatalf("v2's log does not name its version:\n%s", crashTail(v2.out.String(), 20))
	}
	t.Logf("%d messages across the upgrade (%d window(s) open on v1 at the switch): 0 lost, 0 doubled, 0 stuck", total, len(v1Windows))
}

// chatCount is how many messages the chatter has sent so far.
func chatCount(c *chatter) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, texts := range c.sent {
		n += len(texts)
	}
	return n
}
