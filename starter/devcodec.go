package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ilinkflow/ilinkflow/internal/gateway"
	"github.com/ilinkflow/ilinkflow/sealing"
	"github.com/ilinkflow/ilinkflow/wfapi"
)

// devCodecTokenLabel is the HKDF label deriving the `starter dev` codec endpoint's token
// from the dev key file's key (never the key itself, nor the payload codec's keys).
const devCodecTokenLabel = "ilinkflow/dev-codec-token"

// devCodecToken is the token of the codec endpoint `starter dev` serves: the
// environment's ILINKFLOW_CODEC_TOKEN when set; else, when the keys come from the dev key
// file, one derived from its key, the same on every run, so a command printed by one run
// works in the next; else (keys configured in the environment) a random one for this run.
func devCodecToken(getenv func(string) string, keys *sealing.Keyring, fromDevFile bool) (string, error) {
	if v := strings.TrimSpace(getenv(gateway.EnvCodecToken)); v != "" {
		return v, nil
	}
	if fromDevFile {
		current, subkeys, err := keys.DeriveKeys(devCodecTokenLabel)
		if err != nil {
			return "", fmt.Errorf("dev codec token: %w", err)
		}
		token := hex.EncodeToString(subkeys[current][:24])
		for _, k := range subkeys {
			clear(k)
		}
		return token, nil
	}
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// codecShowCommand is the `temporal workflow show` command line that shows workflowID's
// history with its payloads decoded through the codec endpoint at endpoint (its token
// in the form --codec-auth sends as the Authorization header), on the Temporal server,
// namespace, profile and config file c names. Every argument is quoted for a POSIX shell
// where it needs it; the codec flags come last.
func codecShowCommand(c *conn, workflowID, endpoint, token string) string {
	args := []string{"temporal", "workflow", "show", "--workflow-id", workflowID, "--address", c.temporal, "--namespace", c.namespace}
	if c.profile != "" {
		args = append(args, "--profile", c.profile)
	}
	if c.configFile != "" {
		args = append(args, "--config-file", c.configFile)
	}
	args = append(args, "--detailed", "--codec-endpoint", endpoint, "--codec-auth", "Bearer "+token)
	for i, a := range args {
		args[i] = shellQuote(a)
	}
	return strings.Join(args, " ")
}

// shellQuote quotes s for a POSIX shell: as is when it holds only characters no shell
// interprets, else in single quotes.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:@,+=%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// devServerArgs are the arguments of `temporal server start-dev` as dev runs it: on
// host:port with its UI on uiPort, namespace registered, ilinkflow's search attributes
// created in it, and, when uiCodec is set, the UI's codec endpoint (--ui-codec-endpoint:
// the UI server then tells the browser to POST the payloads it shows to uiCodec/decode
// itself, with X-Namespace and no Authorization header).
func devServerArgs(host, port string, uiPort int, namespace, uiCodec string) []string {
	args := []string{"server", "start-dev", "--ip", host, "--port", port, "--ui-port", strconv.Itoa(uiPort),
		"--namespace", namespace, "--log-level", "error"}
	if uiCodec != "" {
		args = append(args, "--ui-codec-endpoint", uiCodec)
	}
	return append(args, wfapi.DevServerArgs()...)
}

// devUIOrigin is the origin of the dev server's UI on host (the --ip dev gives it) and
// uiPort: the URL the banner prints, and the Origin a browser on it sends.
func devUIOrigin(host string, uiPort int) string {
	return "http://" + net.JoinHostPort(host, strconv.Itoa(uiPort))
}

// devUICodecEndpoint is the codec endpoint (codecURL, on the worker's HTTP listener at
// httpAddr) the dev server's UI is told about when dev starts the server on
// temporalAddr, or "" when the UI's host or the listener is not loopback: the UI's
// token-less codec path (gateway.Options.DevUICodecOrigin) is for a UI on this machine
// only, and a page elsewhere could not reach a loopback endpoint anyway.
func devUICodecEndpoint(temporalAddr string, httpAddr net.Addr, codecURL string) string {
	host, _, err := net.SplitHostPort(temporalAddr)
	if err != nil {
		return ""
	}
	ip := net.ParseIP(host)
	if !strings.EqualFold(host, "localhost") && (ip == nil || !ip.IsLoopback()) {
		return ""
	}
	if t, ok := httpAddr.(*net.TCPAddr); !ok || !t.IP.IsLoopback() {
		return ""
	}
	return codecURL
}

// installationID reads the installation id the workflow ids name (docs/workflow-ids.md).
func installationID(ctx context.Context, pool *pgxpool.Pool) (string, error) {
	var id string
	if err := pool.QueryRow(ctx, "SELECT installation_id FROM installation").Scan(&id); err != nil {
		return "", fmt.Errorf("read the installation id: %w", err)
	}
	return id, nil
}

// latestWindow is the newest reply window of account (0 when it has none).
func latestWindow(ctx context.Context, pool *pgxpool.Pool, account string) int64 {
	var id *int64
	if err := pool.QueryRow(ctx, "SELECT max(reply_window_id) FROM reply_windows WHERE account_key = $1", account).Scan(&id); err != nil || id == nil {
		return 0
	}
	return *id
}
