package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store"
)

// mcpAgentResult is what `starter mcp-agent add|token|revoke` prints. Token is set by add
// and token only: it is shown once and stored as its hash.
type mcpAgentResult struct {
	Agent   string `json:"agent"`
	Token   string `json:"token,omitempty"`
	Revoked bool   `json:"revoked,omitempty"`
	// Changed is false when revoke found the token revoked already.
	Changed bool `json:"changed"`
}

// mcpAgentRow is one agent of `starter mcp-agent list`: never its token.
type mcpAgentRow struct {
	Agent         string     `json:"agent"`
	CreatedAt     time.Time  `json:"created_at"`
	CreatedBy     string     `json:"created_by"`
	TokenIssuedAt time.Time  `json:"token_issued_at"`
	RevokedAt     *time.Time `json:"revoked_at,omitempty"`
	RevokedBy     string     `json:"revoked_by,omitempty"`
	Bots          int64      `json:"bots"`
}

func mcpAgentCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	fs, c := commandFlags("mcp-agent", help{
		"mcp-agent (add NAME | token NAME | revoke NAME | list) [flags]",
		"Manages the agents that connect to the MCP server (POST /mcp on the agent-facing address) with a bearer token: " +
			"add creates one and prints its token once, token issues a new one (the old one is refused at once), revoke refuses it, " +
			"list shows them. Route a bot to one with: starter route --account KEY --mcp-agent NAME.",
		"starter mcp-agent add support\nstarter route --account ilk_0123abcd --mcp-agent support\nstarter mcp-agent revoke support"},
		withDB|withJSON, stderr, getenv)
	by := fs.String("by", envOr(getenv, "USER", "operator"), "who adds or revokes the agent (recorded with it)")
	help, rest, err := parseArgs(fs, args, stdout)
	if help || err != nil {
		return err
	}
	if len(rest) == 0 {
		return usagef("mcp-agent: give add NAME, token NAME, revoke NAME or list")
	}
	verb, rest := rest[0], rest[1:]
	switch {
	case verb == "list" && len(rest) != 0:
		return usagef("mcp-agent list takes no argument")
	case verb == "add" || verb == "token" || verb == "revoke":
		if len(rest) != 1 {
			return usagef("mcp-agent %s takes one agent name", verb)
		}
		if err := store.CheckMCPAgentName(rest[0]); err != nil {
			return usagef("mcp-agent %s: %v", verb, err)
		}
	case verb != "list":
		return usagef("mcp-agent: unknown action %q: want add, token, revoke or list", verb)
	}
	st, closeFn, err := openStore(ctx, c, getenv)
	if err != nil {
		return err
	}
	defer closeFn()
	if verb == "list" {
		return listMCPAgents(ctx, st, c.json, stdout)
	}
	out := mcpAgentResult{Agent: rest[0], Changed: true}
	switch verb {
	case "add":
		token, err := st.CreateMCPAgent(ctx, time.Now(), out.Agent, *by)
		if err != nil {
			return err
		}
		out.Token = token.Reveal()
	case "token":
		token, err := st.ReissueMCPAgentToken(ctx, time.Now(), out.Agent)
		if err != nil {
			return err
		}
		out.Token = token.Reveal()
	case "revoke":
		if out.Changed, err = st.RevokeMCPAgent(ctx, time.Now(), out.Agent, *by); err != nil {
			return err
		}
		out.Revoked = true
	}
	if c.json {
		return printJSON(stdout, out)
	}
	switch {
	case out.Token != "":
		fmt.Fprintf(stdout, "MCP agent %s: its token (shown once; any earlier one is refused from now on):\n%s\n", out.Agent, out.Token)
	case !out.Changed:
		fmt.Fprintf(stdout, "MCP agent %s: its token was revoked already\n", out.Agent)
	default:
		fmt.Fprintf(stdout, "MCP agent %s: its token is revoked and refused from now on\n", out.Agent)
	}
	return nil
}

func listMCPAgents(ctx context.Context, st *store.Store, asJSON bool, stdout io.Writer) error {
	agents, err := st.ListMCPAgents(ctx)
	if err != nil {
		return err
	}
	rows := make([]mcpAgentRow, 0, len(agents))
	for _, a := range agents {
		rows = append(rows, mcpAgentRow{Agent: a.Name, CreatedAt: a.CreatedAt, CreatedBy: a.CreatedBy, TokenIssuedAt: a.TokenIssuedAt,
			RevokedAt: a.RevokedAt, RevokedBy: a.RevokedBy, Bots: a.Bots})
	}
	if asJSON {
		return printJSON(stdout, rows)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tBOTS\tTOKEN ISSUED\tREVOKED\tCREATED BY")
	for _, r := range rows {
		revoked := "-"
		if r.RevokedAt != nil {
			revoked = r.RevokedAt.UTC().Format(time.RFC3339) + " by " + r.RevokedBy
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", r.Agent, r.Bots, r.TokenIssuedAt.UTC().Format(time.RFC3339), revoked, r.CreatedBy)
	}
	return tw.Flush()
}
