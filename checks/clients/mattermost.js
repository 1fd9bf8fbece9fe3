// The official Mattermost client (@mattermost/client: Client4 and
// WebSocketClient) performing, against checks/fake/mattermost, each
// operation gatewayd performs. Reads {url, token, ops} as JSON on stdin;
// each op is {op, call, args, token (instead of input's)}. Every request is tagged with the header
// X-Boxmaker-Op so the fake can group what each op sent. Writes
// {results: [{op, ok, data, error}], events: [...]} as JSON on stdout.
'use strict';
const {Client4, WebSocketClient} = require('@mattermost/client');
const WebSocket = require('ws');

// The clients log to the console; stdout is the answer.
console.log = (...a) => console.error(...a);

// Node 20 has fetch but no browser WebSocket or CloseEvent; the
// WebSocketClient reads both as globals (WebSocket.OPEN, new CloseEvent).
globalThis.WebSocket = WebSocket;
if (typeof globalThis.CloseEvent === 'undefined') {
    globalThis.CloseEvent = class CloseEvent extends Event {
        constructor(type, init) {
            super(type);
            this.code = init?.code;
            this.wasClean = init?.wasClean;
        }
    };
}

function read() {
    return new Promise((resolve) => {
        let s = '';
        process.stdin.on('data', (d) => { s += d; });
        process.stdin.on('end', () => resolve(JSON.parse(s)));
    });
}

function client(input, op, token) {
    const c = new Client4();
    c.setUrl(input.url);
    c.setToken(token || input.token);
    c.setHeader('X-Boxmaker-Op', op);
    return c;
}

// socket connects a WebSocketClient with the token (its authentication
// challenge) and resolves once the hello has come and the challenge has
// been answered.
function socket(input, op, events) {
    const ws = new WebSocketClient({
        newWebSocketFn: (url) => new WebSocket(url, {headers: {'X-Boxmaker-Op': op}}),
        minWebSocketRetryTime: 60000,
    });
    ws.addMessageListener((msg) => events.push(msg));
    return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('no hello within 5 s')), 5000);
        ws.addMessageListener((msg) => {
            if (msg.event === 'hello') {
                clearTimeout(timer);
                resolve(ws);
            }
        });
        ws.initialize(input.url.replace(/^http/, 'ws') + '/api/v4/websocket', input.token);
    });
}

const wait = (ms) => new Promise((r) => setTimeout(r, ms));

async function run(input, o, events, state) {
    const c = client(input, o.op, o.token);
    const a = o.args || [];
    switch (o.call) {
    case 'getMe': return c.getMe();
    case 'createPost': return c.createPost(a[0]);
    case 'patchPost': return c.patchPost(a[0]);
    case 'getPost': return c.getPost(a[0]);
    case 'createDirectChannel': return c.createDirectChannel(a[0]);
    case 'getPostThread': return c.getPaginatedPostThread(a[0], {fetchAll: true});
    case 'getPostsSince': return c.getPostsSince(a[0], a[1]);
    case 'getPosts': return c.getPosts(a[0], a[1], a[2]);
    case 'getFileInfosForPost': return c.getFileInfosForPost(a[0]);
    case 'uploadFile': {
        // As the web app builds it: channel_id, then the file.
        const fd = new FormData();
        fd.append('channel_id', a[0]);
        fd.append('files', new Blob([a[2]]), a[1]);
        return c.uploadFile(fd);
    }
    case 'getFile': {
        // The web app downloads a file from Client4's getFileUrl with the
        // client's own headers (its token as Bearer).
        const r = await fetch(c.getFileUrl(a[0]), c.getOptions({method: 'get'}));
        if (!r.ok) {
            throw new Error('getFile: ' + r.status);
        }
        return {size: (await r.arrayBuffer()).byteLength, type: r.headers.get('content-type')};
    }
    case 'connect':
        state.ws = await socket(input, o.op, events);
        return {connection_id: state.ws.connectionId, sequence: state.ws.serverSequence};
    case 'userTyping':
        return new Promise((resolve) => state.ws.userTyping(a[0], a[1], resolve));
    case 'waitEvents': {
        // Wait until n events (hello included) have come, or 5 s.
        for (let i = 0; i < 100 && events.length < a[0]; i++) {
            await wait(50);
        }
        return {events: events.length};
    }
    case 'close':
        state.ws.close();
        return {};
    default:
        throw new Error('unknown call ' + o.call);
    }
}

(async () => {
    const input = await read();
    const results = [];
    const events = [];
    const state = {};
    for (const o of input.ops) {
        try {
            results.push({op: o.op, ok: true, data: await run(input, o, events, state)});
        } catch (e) {
            // ClientError carries the server's AppError id and status.
            results.push({op: o.op, ok: false, error: {message: e.message, server_error_id: e.server_error_id, status_code: e.status_code}});
        }
    }
    process.stdout.write(JSON.stringify({results, events}));
    process.exit(0);
})();
