// Connection admission and timeouts, below HTTP parsing: per-client and global caps, and the
// idle / header / body deadlines that close sockets which hold a slot without sending a request.
//
// Why not node:http's own `maxConnections` and `headersTimeout`: at the cap node drops every new
// connection, so a flood of slow sockets (opened faster than the header timeout closes them)
// locks out /health and every real client; and a connection that never sends a byte is not
// under the header timeout at all. Here a connection beyond a cap evicts the oldest connection
// of that scope still waiting for its request (those carry no work yet and the flood's sockets
// are among them), and is refused with a 503 only when every connection in scope is carrying a
// request. A new connection that sends its request at once — a /health probe — is therefore
// always read.
import type { Server } from "node:http";
import type { Socket } from "node:net";

export interface ConnectionLimits {
  maxConnections: number;
  maxConnectionsPerClient: number;
  /** Close a connection that sends nothing for this long while its request is awaited. */
  idleTimeoutMs: number;
  /** Close a connection whose request headers are not complete this long after it connected or was last answered. */
  headersTimeoutMs: number;
  /** Close (408) a connection whose request body is not complete this long after its headers. */
  bodyTimeoutMs: number;
  checkIntervalMs: number;
}

/** waiting: no request yet (or answered and kept alive); reading: headers in, body arriving; working: being answered. */
type Phase = "waiting" | "reading" | "working";

interface Tracked {
  socket: Socket;
  client: string;
  phase: Phase;
  /** When the current phase began. */
  since: number;
  /** Whether a request on it has been answered (a kept-alive client, not a stranger). */
  answeredOnce: boolean;
  /** bytesRead when the phase began. */
  phaseBytes: number;
  /** bytesRead at the last progress, and when that was. */
  bytes: number;
  progressAt: number;
}

export interface ConnectionStats {
  open: number;
  /** Connections closed to make room under a cap. */
  evicted: number;
  /** Connections refused (every one in scope was carrying a request). */
  refused: number;
  /** Connections closed by the idle, header or body deadline. */
  timedOut: number;
}

const REFUSED =
  "HTTP/1.1 503 Service Unavailable\r\nconnection: close\r\nretry-after: 1\r\ncontent-type: application/json\r\n";
const TIMED_OUT = "HTTP/1.1 408 Request Timeout\r\nconnection: close\r\ncontent-length: 0\r\n\r\n";

function refusal(message: string): string {
  const body = JSON.stringify({ error: { message, type: "server_error", param: null, code: "503" } });
  return `${REFUSED}content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}

export class ConnectionGuard {
  private readonly open = new Map<Socket, Tracked>();
  /** Insertion-ordered (oldest first) per client: eviction scans from the front. */
  private readonly byClient = new Map<string, Set<Tracked>>();
  private evicted = 0;
  private refused = 0;
  private timedOut = 0;
  private readonly timer: NodeJS.Timeout;

  constructor(
    server: Server,
    private readonly limits: ConnectionLimits,
  ) {
    // node:http's own connection listener (registered when the server was created) has run;
    // destroying the socket here is safe, and one not destroyed is parsed as usual.
    server.on("connection", (socket: Socket) => this.admit(socket));
    this.timer = setInterval(() => this.sweep(), limits.checkIntervalMs);
    this.timer.unref();
  }

  stats(): ConnectionStats {
    return { open: this.open.size, evicted: this.evicted, refused: this.refused, timedOut: this.timedOut };
  }

  /** A request's headers arrived on `socket`: its body is awaited. */
  reading(socket: Socket): void {
    this.enter(socket, "reading");
  }

  /** The request on `socket` is read in full (or needs no body): it is work now, never evicted. */
  working(socket: Socket): void {
    this.enter(socket, "working");
  }

  /**
   * The response on `socket` is complete (handed to the socket): it waits for its next request,
   * under the idle and header deadlines again, so a client that stops reading is closed too.
   */
  answered(socket: Socket): void {
    this.enter(socket, "waiting");
    const t = this.open.get(socket);
    if (t) t.answeredOnce = true;
  }

  close(): void {
    clearInterval(this.timer);
  }

  private enter(socket: Socket, phase: Phase): void {
    const t = this.open.get(socket);
    if (!t) return;
    const now = performance.now();
    t.phase = phase;
    t.since = now;
    t.phaseBytes = socket.bytesRead;
    t.bytes = socket.bytesRead;
    t.progressAt = now;
  }

  private admit(socket: Socket): void {
    const client = socket.remoteAddress ?? "?";
    const peers = this.byClient.get(client) ?? new Set<Tracked>();
    if (peers.size >= this.limits.maxConnectionsPerClient && !this.evictFrom(peers)) {
      this.refuse(socket, `too many connections from this client (limit ${this.limits.maxConnectionsPerClient})`);
      return;
    }
    if (this.open.size >= this.limits.maxConnections && !this.evictFrom(this.open.values())) {
      this.refuse(socket, `too many connections (limit ${this.limits.maxConnections})`);
      return;
    }
    const now = performance.now();
    const t: Tracked = {
      socket,
      client,
      phase: "waiting",
      answeredOnce: false,
      since: now,
      phaseBytes: 0,
      bytes: 0,
      progressAt: now,
    };
    this.open.set(socket, t);
    peers.add(t);
    this.byClient.set(client, peers);
    socket.once("close", () => {
      this.open.delete(socket);
      peers.delete(t);
      if (peers.size === 0 && this.byClient.get(client) === peers) this.byClient.delete(client);
    });
  }

  /**
   * Closes the oldest connection among `scope` that is waiting for its request — one that has
   * never had a request answered first (a kept-alive client may be about to send its next one);
   * false if none is waiting.
   */
  private evictFrom(scope: Iterable<Tracked>): boolean {
    let keptAlive: Tracked | null = null;
    for (const t of scope) {
      if (t.phase !== "waiting") continue;
      if (t.answeredOnce) {
        keptAlive ??= t;
        continue;
      }
      this.evicted++;
      this.drop(t);
      return true;
    }
    if (!keptAlive) return false;
    this.evicted++;
    this.drop(keptAlive);
    return true;
  }

  private drop(t: Tracked): void {
    this.open.delete(t.socket);
    this.byClient.get(t.client)?.delete(t);
    t.socket.destroy();
  }

  private refuse(socket: Socket, message: string): void {
    this.refused++;
    socket.on("error", () => {});
    socket.end(refusal(message));
    socket.destroySoon?.();
    setTimeout(() => socket.destroy(), 1000).unref();
  }

  private sweep(): void {
    const now = performance.now();
    const { idleTimeoutMs, headersTimeoutMs, bodyTimeoutMs } = this.limits;
    for (const t of [...this.open.values()]) {
      if (t.phase === "working") continue;
      const bytes = t.socket.bytesRead;
      if (bytes !== t.bytes) {
        t.bytes = bytes;
        t.progressAt = now;
      }
      const silent = now - t.progressAt > idleTimeoutMs;
      const late = now - t.since > (t.phase === "waiting" ? headersTimeoutMs : bodyTimeoutMs);
      if (!silent && !late) continue;
      this.timedOut++;
      this.open.delete(t.socket);
      this.byClient.get(t.client)?.delete(t);
      // A request begun gets a 408; a connection that sent nothing (or nothing since its last answer) just closes.
      if (t.phase === "reading" || bytes > t.phaseBytes) {
        t.socket.on("error", () => {});
        t.socket.end(TIMED_OUT);
        setTimeout(() => t.socket.destroy(), 1000).unref();
      } else t.socket.destroy();
    }
  }
}
