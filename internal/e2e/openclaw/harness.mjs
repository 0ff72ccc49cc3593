// harness.mjs drives the official OpenClaw Weixin plugin (@tencent-weixin/openclaw-weixin,
// pinned in package.json) as an iLink client: its own QR login (auth/login-qr), long-poll
// loop (monitor/monitor), sending and CDN upload (messaging/send, messaging/send-media),
// media download (media/media-download) and API calls (api/api). It does not speak the
// protocol itself: every iLink request below is made by the plugin's code.
//
// Protocol: one JSON command per line on stdin, one JSON event per line on stdout; logs
// (the plugin's logger and anything it prints) go to stderr. A command may carry "id";
// its events echo it, and the last event of a command carries "done": true.
//
//   {"cmd":"login","base_url":"http://127.0.0.1:PORT/",state_dir}
//       -> {"ev":"qrcode",qrcode,qrcode_img_content} {"ev":"qr_status",status}...
//          {"ev":"login","status":"confirmed"|"binded_redirect"|"failed",bot_token,ilink_bot_id,baseurl,ilink_user_id,account_id,message}
//   {"cmd":"verify_code","code":"123456"}   answers the plugin's stdin prompt after need_verifycode
//   {"cmd":"poll",base_url,token,account_id,cdn_base_url,state_dir}
//       -> {"ev":"polling",account_id,sync_file,cursor}; later {"ev":"message",...WeixinMessage,"dispatch":{...}},
//          {"ev":"getupdates_sent",get_updates_buf} (each long poll as it goes out),
//          {"ev":"error",message,ret,errcode}, {"ev":"session_expired",errcode,pause_ms}, {"ev":"poll_ended"}
//   {"cmd":"stop_poll"} -> {"ev":"poll_stopped"}
//   {"cmd":"download","item":<MessageItem>} -> {"ev":"downloaded",sha256,bytes,path} | {"ev":"download_error",message}
//   {"cmd":"send_text",to,context_token,text} / {"cmd":"send_image",to,context_token,path,text}
//       -> {"ev":"sent",client_id,message_id,responses} | {"ev":"send_error",message,ret,errcode,responses}
//   {"cmd":"typing",to,context_token,status:"typing"|"cancel"} -> {"ev":"typing",typing_ticket,status} | {"ev":"typing_error"}
//   {"cmd":"notify_start"} / {"cmd":"notify_stop"} -> {"ev":"notified",which,ret,errmsg} (error: the call failed,
//       which the plugin itself ignores)
//
// Bot fields (base_url, token, account_id, cdn_base_url) default to the last login or poll;
// given only account_id of another account, to what the plugin saved at that account's login.
//
// What had to be stood in for (the plugin is an OpenClaw channel plugin, not a library):
//   - The OpenClaw host (peer dependency "openclaw", Node >= 24, ~330 packages) is not
//     installed. The client modules import a few functions from six "openclaw/plugin-sdk/*"
//     subpaths (logging dir, file lock, account id, DM authorization, hooks); a module
//     resolve hook (below) serves them from sdkStandIns. None of them touches the wire.
//   - The plugin's package.json asks for Node >= 22.13; these modules run on Node 20
//     (only its SQLite quote cache needs node:sqlite, and the harness does not start it).
//   - The plugin's QR login always polls the fixed host https://ilinkai.weixin.qq.com
//     (auth/login-qr.ts FIXED_BASE_URL; its apiBaseUrl argument is ignored). The harness's
//     fetch routes that origin to the login's base_url, as a hosts entry would.
//   - monitorWeixinProvider hands each message to processOneMessage, which needs the
//     OpenClaw channel runtime; channelRuntime below is the least of it: it records the
//     inbound session nowhere and, instead of running an agent, emits the message.
import { register } from "node:module";
import { AsyncLocalStorage } from "node:async_hooks";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import readline from "node:readline";
import { PassThrough } from "node:stream";

// stdout carries events only: the plugin writes QR hints and prompts to process.stdout.
// The real stdin carries commands; the plugin, which prompts for the QR verify code on
// process.stdin, gets a stream of its own.
const writeEvent = process.stdout.write.bind(process.stdout);
process.stdout.write = process.stderr.write.bind(process.stderr);
const commandInput = process.stdin;
const pluginStdin = new PassThrough();
Object.defineProperty(process, "stdin", { value: pluginStdin, configurable: true, enumerable: true });
function emit(ev) {
  writeEvent(`${JSON.stringify(ev)}\n`);
}
function log(msg) {
  process.stderr.write(`[harness] ${msg}\n`);
}

// The plugin keeps its files (accounts, get_updates_buf, context tokens) under
// $OPENCLAW_STATE_DIR (storage/state-dir.ts); never let it fall back to ~/.openclaw.
if (!process.env.OPENCLAW_STATE_DIR) {
  process.env.OPENCLAW_STATE_DIR = fs.mkdtempSync(path.join(os.tmpdir(), "openclaw-harness-"));
}
const stateDir = () => process.env.OPENCLAW_STATE_DIR;

// ---------------------------------------------------------------------------
// Stand-ins for the OpenClaw host's plugin-sdk (only what the client modules import).
// ---------------------------------------------------------------------------

// openclaw/src/routing/account-id.ts: "b0f5860fdecb@im.bot" -> "b0f5860fdecb-im-bot".
function normalizeAccountId(value) {
  const trimmed = String(value ?? "").trim();
  if (!trimmed) return "default";
  if (/^[a-z0-9][a-z0-9_-]{0,63}$/i.test(trimmed)) return trimmed.toLowerCase();
  const id = trimmed
    .toLowerCase()
    .replace(/[^a-z0-9_-]+/g, "-")
    .replace(/^-+/, "")
    .replace(/-+$/, "")
    .slice(0, 64);
  return id || "default";
}

const sdkStandIns = {
  "infra-runtime": {
    // Where the plugin's logger writes its JSON-lines log file (util/logger.ts).
    resolvePreferredOpenClawTmpDir: () => path.join(stateDir(), "tmp"),
    // One harness process per state dir: nothing to lock against.
    withFileLock: async (_file, _opts, fn) => fn(),
  },
  "account-id": { normalizeAccountId, DEFAULT_ACCOUNT_ID: "default" },
  // processOneMessage builds typing callbacks for the agent's reply; no agent runs here.
  "channel-message": { createTypingCallbacks: (callbacks) => callbacks },
  // Every sender may talk to the bot (OpenClaw would apply its dmPolicy/pairing here).
  "command-auth": {
    resolveSenderCommandAuthorizationWithRuntime: async () => ({
      senderAllowedForCommands: true,
      commandAuthorized: true,
    }),
    resolveDirectDmAuthorizationOutcome: () => "allowed",
  },
  // No message_sending / message_sent hooks are registered (getGlobalHookRunner -> null).
  "plugin-runtime": { getGlobalHookRunner: () => null },
  "hook-runtime": {
    fireAndForgetHook: () => {},
    buildCanonicalSentMessageHookContext: (x) => x,
    toPluginMessageContext: (x) => x,
    toPluginMessageSentEvent: (x) => x,
  },
  // Only triggerWeixinChannelReload uses it (after the host's own login); not called here.
  "config-runtime": { loadConfig: () => ({}), writeConfigFile: async () => {} },
};
globalThis.__openclawSdkStandIns = sdkStandIns;

const resolveHook = `
let modules = {};
export function initialize(data) { modules = data.modules; }
export async function resolve(specifier, context, next) {
  const m = /^openclaw\\/plugin-sdk\\/(.+)$/.exec(specifier);
  if (!m) return next(specifier, context);
  const names = modules[m[1]];
  if (!names) throw new Error("openclaw harness: no stand-in for " + specifier);
  const src = "const m = globalThis.__openclawSdkStandIns[" + JSON.stringify(m[1]) + "];\\n" +
    names.map((n) => "export const " + n + " = m." + n + ";").join("\\n");
  return { url: "data:text/javascript," + encodeURIComponent(src), shortCircuit: true };
}`;
register(`data:text/javascript,${encodeURIComponent(resolveHook)}`, {
  data: {
    modules: Object.fromEntries(Object.entries(sdkStandIns).map(([k, v]) => [k, Object.keys(v)])),
  },
});

// ---------------------------------------------------------------------------
// The harness's network: route the plugin's fixed QR host, observe iLink answers.
// ---------------------------------------------------------------------------

const FIXED_QR_ORIGIN = "https://ilinkai.weixin.qq.com";
const routes = new Map(); // origin -> base URL (ending in "/")
const withSlash = (u) => (u.endsWith("/") ? u : `${u}/`);

function routeURL(url) {
  for (const [origin, base] of routes) {
    if (url === origin || url.startsWith(`${origin}/`)) return base + url.slice(origin.length + 1);
  }
  return url;
}

function routeQRHost(baseUrl) {
  const base = withSlash(baseUrl);
  routes.set(FIXED_QR_ORIGIN, base);
  // After scaned_but_redirect the plugin polls https://<redirect_host>: serve a plain-HTTP
  // base's own host the same way.
  const u = new URL(base);
  if (u.protocol === "http:") routes.set(`https://${u.host}`, base);
}

// Each command runs in its own async context; the fetch below tells it what iLink answered.
const als = new AsyncLocalStorage();
const realFetch = globalThis.fetch;
// (The plugin calls fetch with a URL string and an init object.)
globalThis.fetch = async (input, init) => {
  const url = routeURL(String(input));
  const endpoint = /\/ilink\/bot\/([^?]+)/.exec(new URL(url).pathname)?.[1];
  const ctx = als.getStore();
  if (endpoint === "getupdates" && ctx?.poll) {
    // The monitor is about to hold a long poll: say with which cursor.
    let buf;
    try {
      buf = JSON.parse(String(init?.body ?? "{}")).get_updates_buf;
    } catch {}
    emit({ ev: "getupdates_sent", poll_id: ctx.poll.id, get_updates_buf: buf ?? "" });
  }
  const res = await realFetch(url, init);
  if (endpoint && ctx?.onResponse) {
    const text = await res.clone().text();
    let body;
    try {
      body = api.parseWeixinApiJson(text);
    } catch {
      body = { unparsed: text.slice(0, 200) };
    }
    ctx.onResponse(endpoint, res.status, body);
  }
  return res;
};

// ---------------------------------------------------------------------------
// The plugin's own modules (loaded after the hook and fetch are in place).
// ---------------------------------------------------------------------------

const PKG = "@tencent-weixin/openclaw-weixin";
const load = (p) => import(`${PKG}/dist/src/${p}.js`);
const [
  api,
  configCache,
  sessionGuard,
  types,
  loginQr,
  accounts,
  monitor,
  inbound,
  send,
  sendMedia,
  mediaDownload,
  syncBuf,
  loggerMod,
] = await Promise.all(
  [
    "api/api",
    "api/config-cache",
    "api/session-guard",
    "api/types",
    "auth/login-qr",
    "auth/accounts",
    "monitor/monitor",
    "messaging/inbound",
    "messaging/send",
    "messaging/send-media",
    "media/media-download",
    "storage/sync-buf",
    "util/logger",
  ].map(load),
);
const pluginVersion = JSON.parse(
  fs.readFileSync(new URL(import.meta.resolve(`${PKG}/package.json`)), "utf-8"),
).version;

// The plugin logs to a file under the tmp dir; copy it to stderr, and watch for the
// monitor's stale-token line, written right after it paused the account (monitor.ts).
const debugLogs = /^(debug|trace)$/i.test(process.env.OPENCLAW_LOG_LEVEL ?? "");
function tapLogger(l, accountId) {
  for (const level of ["debug", "info", "warn", "error"]) {
    const orig = l[level].bind(l);
    l[level] = (msg) => {
      orig(msg);
      onPluginLog(level, String(msg), accountId);
    };
  }
  const withAccount = l.withAccount.bind(l);
  l.withAccount = (id) => tapLogger(withAccount(id), id);
  return l;
}
tapLogger(loggerMod.logger);

function onPluginLog(level, msg, accountId) {
  if (level !== "debug" || debugLogs) {
    process.stderr.write(`[plugin ${level}]${accountId ? ` [${accountId}]` : ""} ${msg}\n`);
  }
  const p = als.getStore()?.poll;
  if (level === "error" && p && /is stale, pausing all requests/.test(msg)) {
    emit({
      ev: "session_expired",
      poll_id: p.id,
      account_id: p.accountId,
      errcode: p.lastError?.errcode ?? sessionGuard.STALE_TOKEN_ERRCODE,
      ret: p.lastError?.ret,
      errmsg: p.lastError?.errmsg,
      paused: sessionGuard.isSessionPaused(p.accountId),
      pause_ms: sessionGuard.getRemainingPauseMs(p.accountId),
    });
  }
}

// ---------------------------------------------------------------------------
// The bot the commands act for (last login or poll; fields on a command override it).
// ---------------------------------------------------------------------------

let bot = {};
const cdnBaseFor = (c) => (c.cdn_base_url || bot.cdnBaseUrl || accounts.CDN_BASE_URL).replace(/\/+$/, "");
function botFor(c) {
  const accountId = c.account_id ? normalizeAccountId(c.account_id) : bot.accountId;
  // Another account than the last one (a restarted harness knows none): its credentials
  // are the ones the plugin saved at its QR login (auth/accounts.ts, which
  // gateway.startAccount reads; without its fallback to iLink's real host).
  let known = bot;
  if (accountId && accountId !== bot.accountId) {
    const saved = accounts.loadWeixinAccount(accountId);
    known = { baseUrl: saved?.baseUrl?.trim(), token: saved?.token?.trim() };
  }
  const b = {
    baseUrl: c.base_url || known.baseUrl,
    token: c.token || known.token,
    accountId,
    cdnBaseUrl: cdnBaseFor(c),
  };
  if (!b.baseUrl || !b.token || !b.accountId) {
    throw new Error("no bot: log in first, or give account_id of a saved login, or base_url, token and account_id");
  }
  return b;
}

// The parts of a failed call a caller can act on: "sendMessage ret=-2 errmsg=...",
// "session paused ... (errcode -14)", "sendMessage 500: ...".
function describeError(err, responses = []) {
  const message = err instanceof Error ? err.message : String(err);
  const last = responses.at(-1)?.body ?? {};
  const num = (re) => {
    const m = re.exec(message);
    return m ? Number(m[1]) : undefined;
  };
  return {
    message,
    ret: last.ret ?? num(/ret=(-?\d+)/),
    errcode: last.errcode ?? num(/errcode[= ](-?\d+)/),
    http_status: num(/^\w+ (\d{3}):/),
  };
}

// ---------------------------------------------------------------------------
// Commands.
// ---------------------------------------------------------------------------

async function cmdLogin(c, id) {
  if (!c.base_url) throw new Error("login needs base_url");
  if (c.state_dir) process.env.OPENCLAW_STATE_DIR = c.state_dir;
  routeQRHost(c.base_url);
  const ctx = {
    onResponse(endpoint, status, body) {
      if (endpoint === "get_bot_qrcode" && status === 200) {
        emit({ ev: "qrcode", id, qrcode: body.qrcode, qrcode_img_content: body.qrcode_img_content });
      } else if (endpoint === "get_qrcode_status" && status === 200) {
        emit({ ev: "qr_status", id, status: body.status, redirect_host: body.redirect_host });
      }
    },
  };
  await als.run(ctx, async () => {
    const botType = loginQr.DEFAULT_ILINK_BOT_TYPE;
    const start = await loginQr.startWeixinLoginWithQr({ apiBaseUrl: c.base_url, botType, force: true });
    if (!start.qrcodeUrl) {
      emit({ ev: "login", id, done: true, status: "failed", message: start.message });
      return;
    }
    const r = await loginQr.waitForWeixinLogin({
      sessionKey: start.sessionKey,
      apiBaseUrl: c.base_url,
      botType,
      timeoutMs: c.timeout_ms,
    });
    if (r.connected) {
      // What the plugin's auth.login does with a confirmed login (src/channel.ts).
      const accountId = normalizeAccountId(r.accountId);
      accounts.saveWeixinAccount(accountId, { token: r.botToken, baseUrl: r.baseUrl, userId: r.userId });
      accounts.registerWeixinAccountId(accountId);
      if (r.userId) {
        accounts.clearStaleAccountsForUserId(accountId, r.userId, inbound.clearContextTokensForAccount);
      }
      bot = { ...bot, baseUrl: r.baseUrl || accounts.DEFAULT_BASE_URL, token: r.botToken, accountId };
      emit({
        ev: "login",
        id,
        done: true,
        status: "confirmed",
        bot_token: r.botToken,
        ilink_bot_id: r.accountId,
        baseurl: r.baseUrl,
        ilink_user_id: r.userId,
        account_id: accountId,
        message: r.message,
      });
    } else {
      emit({
        ev: "login",
        id,
        done: true,
        status: r.alreadyConnected ? "binded_redirect" : "failed",
        message: r.message,
      });
    }
  });
}

// auth/login-qr.ts reads the verify code from process.stdin itself
// (readVerifyCodeFromStdin), which is pluginStdin here: queue one line for it.
function cmdVerifyCode(c, id) {
  pluginStdin.write(`${String(c.code ?? "").trim()}\n`);
  emit({ ev: "verify_code_sent", id, done: true });
}

let poll = null; // the running monitor

// The least of OpenClaw's channel runtime that processOneMessage (messaging/process-message.ts)
// calls. Media: the plugin downloads and decrypts inbound media itself and hands the bytes
// to saveMediaBuffer. Reply: instead of running an agent, dispatchReplyFromConfig emits the
// message; replies are sent by the send_* commands.
const channelRuntime = {
  media: { saveMediaBuffer: (buf, contentType, subdir) => saveMedia(buf, contentType, subdir) },
  commands: {},
  routing: {
    resolveAgentRoute: ({ accountId, peer }) => ({
      agentId: "harness",
      sessionKey: `harness:${accountId}:${peer.id}`,
      mainSessionKey: `harness:${accountId}`,
    }),
  },
  session: {
    resolveStorePath: () => path.join(stateDir(), "sessions"),
    recordInboundSession: async () => {},
  },
  reply: {
    finalizeInboundContext: (ctx) => ctx,
    resolveHumanDelayConfig: () => undefined,
    createReplyDispatcherWithTyping: () => ({ dispatcher: {}, replyOptions: {}, markDispatchIdle: () => {} }),
    withReplyDispatcher: async ({ run }) => run(),
    dispatchReplyFromConfig: async ({ ctx }) => dispatched(als.getStore().poll, ctx),
  },
};

async function saveMedia(buf, contentType, subdir = "inbound") {
  const dir = path.join(stateDir(), "media", subdir);
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `${crypto.randomUUID()}.bin`);
  fs.writeFileSync(file, buf);
  return { path: file, contentType };
}

const sha256 = (buf) => crypto.createHash("sha256").update(buf).digest("hex");

// The plugin passes the message on as an OpenClaw MsgContext; emit the WeixinMessage it was
// made from (as getupdates returned it, ids kept lossless by the plugin's parser) with it.
function dispatched(p, ctx) {
  // Messages before it that the plugin did not pass on (e.g. slash commands) are dropped.
  const idx = p.pending.findIndex((m) => inbound.getWeixinMessageId(m) === ctx.MessageSidFull);
  const [msg] = idx >= 0 ? p.pending.splice(0, idx + 1).slice(-1) : [{}];
  const dispatch = {
    body: ctx.Body,
    from: ctx.From,
    context_token: ctx.context_token,
    message_sid_full: ctx.MessageSidFull,
    media_path: ctx.MediaPath,
    media_type: ctx.MediaType,
  };
  if (ctx.MediaPath) {
    const data = fs.readFileSync(ctx.MediaPath);
    dispatch.media_sha256 = sha256(data);
    dispatch.media_bytes = data.length;
  }
  emit({ ...msg, ev: "message", poll_id: p.id, dispatch });
}

async function cmdPoll(c, id) {
  if (c.state_dir) process.env.OPENCLAW_STATE_DIR = c.state_dir;
  if (poll) throw new Error(`already polling (poll ${poll.id})`);
  const b = botFor(c);
  bot = b;
  inbound.restoreContextTokens(b.accountId); // as gateway.startAccount does (src/channel.ts)
  const syncFile = syncBuf.getSyncBufFilePath(b.accountId);
  const cursor = syncBuf.loadGetUpdatesBuf(syncFile) ?? "";
  const p = { id, accountId: b.accountId, ac: new AbortController(), pending: [], lastError: null };
  poll = p;
  const ctx = {
    poll: p,
    onResponse(endpoint, status, body) {
      if (endpoint !== "getupdates" || status !== 200) return;
      const failed = (body.ret != null && body.ret !== 0) || (body.errcode != null && body.errcode !== 0);
      p.lastError = failed ? { ret: body.ret, errcode: body.errcode, errmsg: body.errmsg } : null;
      p.pending.push(...(body.msgs ?? []));
    },
  };
  emit({ ev: "polling", id, done: true, account_id: b.accountId, sync_file: syncFile, cursor });
  als
    .run(ctx, () =>
      monitor.monitorWeixinProvider({
        baseUrl: b.baseUrl,
        cdnBaseUrl: b.cdnBaseUrl,
        token: b.token,
        accountId: b.accountId,
        config: { channels: { "openclaw-weixin": {} } }, // the OpenClaw config: nothing set
        channelRuntime,
        abortSignal: p.ac.signal,
        runtime: {
          log: (m) => log(`monitor: ${m}`),
          error: (m) => {
            log(`monitor error: ${m}`);
            const e = describeError(m);
            emit({ ev: "error", poll_id: id, message: e.message, ret: e.ret, errcode: e.errcode });
          },
        },
      }),
    )
    .then(
      () => emit({ ev: "poll_ended", poll_id: id }),
      (err) => emit({ ev: "poll_ended", poll_id: id, error: String(err) }),
    )
    .finally(() => {
      if (poll === p) poll = null;
      p.resolveEnded?.();
    });
}

async function cmdStopPoll(_c, id) {
  const p = poll;
  if (p) {
    const ended = new Promise((resolve) => (p.resolveEnded = resolve));
    p.ac.abort();
    await ended;
  }
  emit({ ev: "poll_stopped", id, done: true, was_polling: Boolean(p) });
}

async function cmdDownload(c, id) {
  if (!c.item) throw new Error("download needs item (a MessageItem)");
  const errors = [];
  let data;
  const got = await mediaDownload.downloadMediaFromItem(c.item, {
    cdnBaseUrl: cdnBaseFor(c),
    saveMedia: async (buf, contentType) => {
      data = buf;
      return saveMedia(buf, contentType, "downloads");
    },
    log: (m) => log(`download: ${m}`),
    errLog: (m) => errors.push(m),
    label: "download",
  });
  const file = got.decryptedPicPath ?? got.decryptedFilePath ?? got.decryptedVideoPath ?? got.decryptedVoicePath;
  if (!file || !data) {
    emit({ ev: "download_error", id, done: true, message: errors.join("; ") || "nothing downloaded (item without media?)" });
    return;
  }
  emit({ ev: "downloaded", id, done: true, sha256: sha256(data), bytes: data.length, path: file });
}

async function cmdSend(c, id, kind) {
  const b = botFor(c);
  const ctx = { responses: [] };
  ctx.onResponse = (endpoint, status, body) => {
    if (endpoint === "sendmessage") ctx.responses.push({ status, body });
  };
  await als.run(ctx, async () => {
    try {
      // The channel's outbound sendText/sendMedia refuse to send while the account is
      // paused after errcode -14, and default to the stored context token (src/channel.ts).
      sessionGuard.assertSessionActive(b.accountId);
      const opts = {
        baseUrl: b.baseUrl,
        token: b.token,
        contextToken: c.context_token ?? inbound.getContextToken(b.accountId, c.to),
        accountId: b.accountId,
      };
      const r =
        kind === "image"
          ? await sendMedia.sendWeixinMediaFile({
              filePath: c.path,
              to: c.to,
              text: c.text ?? "",
              opts,
              cdnBaseUrl: b.cdnBaseUrl,
            })
          : await send.sendMessageWeixin({ to: c.to, text: c.text ?? "", opts });
      emit({
        ev: "sent",
        id,
        done: true,
        client_id: r.messageId,
        message_id: r.serverMessageId,
        responses: ctx.responses,
      });
    } catch (err) {
      emit({ ev: "send_error", id, done: true, ...describeError(err, ctx.responses), responses: ctx.responses });
    }
  });
}

const configManagers = new Map(); // accountId -> the plugin's per-user getconfig cache

async function cmdTyping(c, id) {
  const b = botFor(c);
  let cm = configManagers.get(b.accountId);
  if (!cm) {
    cm = new configCache.WeixinConfigManager({ baseUrl: b.baseUrl, token: b.token }, (m) => log(m));
    configManagers.set(b.accountId, cm);
  }
  const { typingTicket } = await cm.getForUser(c.to, c.context_token);
  if (!typingTicket) {
    // The plugin sends no typing without a ticket (messaging/process-message.ts).
    emit({ ev: "typing_error", id, done: true, message: "getconfig gave no typing_ticket" });
    return;
  }
  const status = c.status === "cancel" ? types.TypingStatus.CANCEL : types.TypingStatus.TYPING;
  try {
    await api.sendTyping({
      baseUrl: b.baseUrl,
      token: b.token,
      body: { ilink_user_id: c.to, typing_ticket: typingTicket, status },
    });
    emit({ ev: "typing", id, done: true, typing_ticket: typingTicket, status });
  } catch (err) {
    emit({ ev: "typing_error", id, done: true, ...describeError(err) });
  }
}

async function cmdNotify(c, id, which) {
  const b = botFor(c);
  const call = which === "start" ? api.notifyStart : api.notifyStop;
  try {
    const resp = await call({ baseUrl: b.baseUrl, token: b.token });
    emit({ ev: "notified", id, done: true, which, ret: resp.ret, errcode: resp.errcode, errmsg: resp.errmsg });
  } catch (err) {
    // The plugin ignores notify failures (gateway.startAccount/stopAccount).
    emit({ ev: "notified", id, done: true, which, error: String(err) });
  }
}

const commands = {
  login: cmdLogin,
  verify_code: cmdVerifyCode,
  poll: cmdPoll,
  stop_poll: cmdStopPoll,
  download: cmdDownload,
  send_text: (c, id) => cmdSend(c, id, "text"),
  send_image: (c, id) => cmdSend(c, id, "image"),
  typing: cmdTyping,
  notify_start: (c, id) => cmdNotify(c, id, "start"),
  notify_stop: (c, id) => cmdNotify(c, id, "stop"),
};

// ---------------------------------------------------------------------------
// Main loop: commands run concurrently; stdin closing ends the harness.
// ---------------------------------------------------------------------------

process.on("unhandledRejection", (err) => log(`unhandled rejection: ${err?.stack ?? err}`));

const rl = readline.createInterface({ input: commandInput, crlfDelay: Infinity });
rl.on("line", (line) => {
  if (!line.trim()) return;
  let c;
  try {
    c = JSON.parse(line);
  } catch (err) {
    emit({ ev: "cmd_error", done: true, message: `not JSON: ${err.message}` });
    return;
  }
  const id = c.id;
  const run = commands[c.cmd];
  if (!run) {
    emit({ ev: "cmd_error", id, done: true, message: `unknown cmd ${JSON.stringify(c.cmd)}` });
    return;
  }
  Promise.resolve()
    .then(() => run(c, id))
    .catch((err) => emit({ ev: "cmd_error", id, done: true, message: String(err?.message ?? err) }));
});
rl.on("close", () => {
  poll?.ac.abort();
  process.exit(0);
});

emit({
  ev: "ready",
  node: process.version,
  plugin_version: pluginVersion,
  state_dir: stateDir(),
});
