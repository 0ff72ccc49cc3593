package webui

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/ilinkflow/ilinkflow/internal/store"
	"github.com/ilinkflow/ilinkflow/vocab"
)

// --- iLink clients ---

// The route forms route a bot to an iLink client (route kind ilink) as to an MCP agent,
// chosen from the store's clients. Given the code a client's QR login page shows, the same
// form approves that login for the bot (store.ApproveILinkLogin, as `starter ilink-client
// approve` does): the client's next poll of the login collects a bot of this account, and
// the account is routed to the client unless it is already.

// setRoute sets a bot's route from a route form; with an ilink route and a login code, it
// approves the client's login for the bot instead, which routes it. It returns the route
// after the change and the code of the login it approved ("" without one).
func (s *server) setRoute(r *http.Request, now time.Time, key, kind string) (store.Route, string, error) {
	in := routeInput(r, key, kind)
	code := store.NormalizeILinkLoginCode(strings.TrimSpace(r.PostFormValue("login_code")))
	if kind != vocab.RouteILink || code == "" {
		rt, err := s.cfg.Store.SetRoute(r.Context(), now, in)
		return rt, "", err
	}
	if err := s.approveILinkLogin(r.Context(), now, code, in.ILinkClient, key); err != nil {
		return store.Route{}, "", err
	}
	rt, _, err := s.cfg.Store.GetRoute(r.Context(), key)
	if store.CodeOf(err) == vocab.CodeSealedUnreadable {
		err = nil
	}
	return rt, code, err
}

// approveILinkLogin approves a waiting login for a live client and a bot.
func (s *server) approveILinkLogin(ctx context.Context, now time.Time, code, client, key string) error {
	if err := store.CheckILinkLoginCode(code); err != nil {
		return err
	}
	if err := store.CheckILinkClientName(client); err != nil {
		return err
	}
	clients, err := s.cfg.Store.ListILinkClients(ctx)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(clients, func(c store.ILinkClient) bool { return c.Name == client })
	switch {
	case i < 0:
		return &store.Error{Code: vocab.CodeILinkClientNotFound, Msg: "no iLink client is named " + client}
	case clients[i].RevokedAt != nil:
		return &store.Error{Code: vocab.CodeInvalidInput, Msg: fmt.Sprintf("the iLink client %s is revoked (starter ilink-client re-token %s lifts it)", client, client)}
	}
	if _, err := s.cfg.Store.GetAccount(ctx, key); err != nil {
		return err
	}
	return s.cfg.Store.ApproveILinkLogin(ctx, now, code, client, key, RouteBy)
}

// iLinkRouteFailure says why an ilink route or a login's approval failed, by the store's
// code ("" for a code of another kind).
func iLinkRouteFailure(code vocab.Code) string {
	switch code {
	case vocab.CodeILinkClientNotFound:
		return "no iLink client has that name (starter ilink-client add NAME creates one)."
	case vocab.CodeILinkLoginNotFound:
		return "no login waits under that code (it expired, was approved already, or the code is mistyped): let the client show a new QR code."
	}
	return ""
}
