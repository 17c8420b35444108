// The dashboard's live view. Every piece of data reaches the page through
// textContent or a text node, never as markup: prompts and names are user
// text.
(function () {
  'use strict';

  var base = document.body.getAttribute('data-base') || '/';
  var state = null;  // the last snapshot, kept current by the updates
  var skew = 0;      // the gateway's clock minus this one, in ms
  var $ = function (id) { return document.getElementById(id); };

  // ---- formatting ----

  function now() { return Date.now() + skew; }

  function ms(s) {
    var t = s ? Date.parse(s) : NaN;
    return isNaN(t) || t <= 0 ? 0 : t;
  }

  function span(ms) {
    var s = Math.max(0, Math.floor(ms / 1000));
    var d = Math.floor(s / 86400), h = Math.floor(s / 3600) % 24, m = Math.floor(s / 60) % 60;
    s %= 60;
    if (d) return d + 'd ' + h + 'h';
    if (h) return h + 'h ' + pad(m) + 'm';
    if (m) return m + 'm ' + pad(s) + 's';
    return s + 's';
  }

  function pad(n) { return n < 10 ? '0' + n : String(n); }

  function clock(t) {
    if (!t) return '—';
    var d = new Date(t), today = new Date(now());
    var opts = { hour: '2-digit', minute: '2-digit' };
    if (d.toDateString() !== today.toDateString()) {
      opts.month = 'short';
      opts.day = 'numeric';
    }
    return d.toLocaleString([], opts);
  }

  function money(x) {
    x = x || 0;
    if (x === 0) return '$0';
    return '$' + x.toFixed(x < 0.01 ? 4 : 2);
  }

  function channel(o) {
    if (o.channel_name) return '#' + o.channel_name;
    return o.channel_id || 'no channel';
  }

  function eventName(o) { return o.name ? o.kind + ' · ' + o.name : o.kind; }

  function outcomeClass(o) {
    if (o === 'ok') return 'ok';
    if (o === 'stopped' || o === 'interrupted') return 'warn';
    return 'bad';
  }

  // ---- DOM helpers ----

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function setText(e, s) {
    s = String(s);
    if (e.textContent !== s) e.textContent = s;
  }

  // rel marks e as showing a time relative to now; tick keeps it current.
  // mode: 'elapsed' (since t), 'ago' (since t, "… ago"), 'until' (to t).
  function rel(e, t, mode) {
    e.setAttribute('data-rel', mode);
    e.setAttribute('data-t', String(t));
    setText(e, relText(t, mode));
  }

  function relText(t, mode) {
    if (!t) return '—';
    var d = now() - t;
    if (mode === 'until') return d >= 0 ? 'due' : 'in ' + span(-d);
    if (mode === 'ago') return span(d) + ' ago';
    return span(d);
  }

  function tick() {
    var all = document.querySelectorAll('[data-rel]');
    for (var i = 0; i < all.length; i++) {
      var e = all[i];
      setText(e, relText(Number(e.getAttribute('data-t')), e.getAttribute('data-rel')));
    }
  }

  // sync makes container's children match items, reusing the element of
  // each key so that a focused button keeps its focus across updates.
  function sync(container, items, key, make, update) {
    var old = new Map();
    Array.prototype.forEach.call(container.children, function (c) { old.set(c.getAttribute('data-key'), c); });
    var prev = null;
    items.forEach(function (item) {
      var k = String(key(item));
      var node = old.get(k);
      if (node) {
        old.delete(k);
      } else {
        node = make(item);
        node.setAttribute('data-key', k);
      }
      update(node, item);
      var want = prev ? prev.nextSibling : container.firstChild;
      if (node !== want) container.insertBefore(node, want);
      prev = node;
    });
    old.forEach(function (n) { n.remove(); });
  }

  function cell(tr, label, cls) {
    var td = el('td', cls);
    td.setAttribute('data-label', label);
    tr.appendChild(td);
    return td;
  }

  function wrap() {
    var s = el('span');
    s.append.apply(s, arguments);
    return s;
  }

  // showEmpty shows the "nothing here" line of a section, or the table
  // that follows it. A list stays: an empty one takes no room, and the
  // running turns' list must stay in place to be a live region.
  function showEmpty(id, empty) {
    var p = $(id), next = p.nextElementSibling;
    p.hidden = !empty;
    if (next && next.tagName === 'TABLE') next.hidden = empty;
  }

  // ---- actions ----

  var toastTimer = 0;
  function toast(msg) {
    var t = $('toast');
    setText(t, msg);
    clearTimeout(toastTimer);
    toastTimer = setTimeout(function () { setText(t, ''); }, 6000);
  }

  // post runs one of the page's actions. The button stays focusable while
  // it runs (aria-disabled, not disabled) so a keyboard user keeps their
  // place.
  function post(path, btn, done) {
    if (btn.getAttribute('aria-disabled') === 'true') return Promise.resolve(false);
    btn.setAttribute('aria-disabled', 'true');
    return fetch(base + path, {
      method: 'POST',
      headers: { 'X-Requested-With': 'dashboard' },
      credentials: 'same-origin'
    }).then(function (r) {
      return r.json().catch(function () { return {}; }).then(function (body) {
        if (!r.ok) throw new Error(body.error || (r.status + ' ' + r.statusText));
        toast(done);
        return true;
      });
    }).catch(function (err) {
      toast('Failed: ' + err.message);
      return false;
    }).finally(function () {
      btn.removeAttribute('aria-disabled');
    });
  }

  // ---- running turns ----

  function makeTurn(t) {
    var li = el('li', 'turn');
    var body = el('div');
    var head = el('p');
    var where = el('strong');
    var what = el('span', 'muted');
    head.append(where, ' ', what);
    var prompt = el('p', 'prompt');
    var meta = el('p', 'meta');
    var elapsed = el('span', 'elapsed');
    // The elapsed time changes every second: screen readers get the start
    // time instead, which does not.
    elapsed.setAttribute('aria-hidden', 'true');
    var started = el('span', 'sr-only');
    var tool = el('span', 'tool');
    // On several processes: which one runs it.
    var proc = el('span', 'proc');
    meta.append(elapsed, started, ' · ', tool, proc);
    body.append(head, prompt, meta);
    var stop = el('button', 'danger stop', 'Stop');
    stop.type = 'button';
    stop.addEventListener('click', function () {
      var cur = li._turn;
      if (!window.confirm('Stop the turn in ' + channel(cur) + '?')) return;
      post('turns/' + encodeURIComponent(cur.event_id) + '/stop', stop, 'Stop sent to ' + channel(cur) + '.')
        .then(function (ok) { if (ok) li.classList.add('stopping'); });
    });
    li.append(body, stop);
    li._parts = { where: where, what: what, prompt: prompt, elapsed: elapsed, started: started, tool: tool, proc: proc, stop: stop };
    return li;
  }

  function updateTurn(li, t) {
    var p = li._parts;
    li._turn = t;
    li.setAttribute('data-id', String(t.event_id));
    setText(p.where, channel(t));
    setText(p.what, eventName(t) + ' #' + t.event_id);
    setText(p.prompt, t.prompt || '');
    var start = ms(t.started_at);
    rel(p.elapsed, start, 'elapsed');
    setText(p.started, 'started ' + clock(start));
    setText(p.tool, t.tool ? t.tool : 'thinking');
    setText(p.proc, t.process ? ' · on ' + t.process : '');
    p.stop.setAttribute('aria-label', 'Stop the turn in ' + channel(t) + ' (event ' + t.event_id + ')');
  }

  function renderRunning() {
    var list = state.running;
    sync($('running-list'), list, function (t) { return t.event_id; }, makeTurn, updateTurn);
    showEmpty('running-empty', list.length === 0);
    // On several processes this list holds the turns of this one only;
    // the others' are under Processes.
    setText($('running-empty'), state.processes ? 'Nothing is running on this process.' : 'Nothing is running.');
    setText($('running-count'), list.length ? '(' + list.length + ')' : '');
    document.title = (list.length ? '(' + list.length + ') ' : '') + 'Gateway';
  }

  // ---- processes ----

  function makeProcess() {
    var tr = el('tr');
    var p = {
      name: cell(tr, 'Process'), role: cell(tr, 'Role'), version: cell(tr, 'Version'),
      busy: cell(tr, 'Busy', 'num'), beat: cell(tr, 'Heartbeat'), turns: cell(tr, 'Turns')
    };
    p.nameText = el('span');
    p.self = el('span', 'muted');
    p.name.append(wrap(p.nameText, p.self));
    p.beatRel = el('span');
    p.beat.append(p.beatRel);
    p.list = el('ul', 'pturns');
    p.turns.append(p.list);
    tr._parts = p;
    return tr;
  }

  function processTurn(t) {
    var li = el('li');
    var since = el('span', 'elapsed');
    rel(since, ms(t.since), 'elapsed');
    li.append(el('span', null, t.channel_name ? '#' + t.channel_name : (t.lane || 'no channel')), ' ',
      el('span', 'muted', '#' + t.event_id), ' · ', since);
    return li;
  }

  function updateProcess(tr, w) {
    var p = tr._parts;
    var self = state.processes && w.name === state.processes.self;
    setText(p.nameText, w.name);
    setText(p.self, self ? ' (this one)' : '');
    var intake = w.role === 'run' && !w.slots;
    setText(p.role, w.role + (intake ? ', takes prompts' : ''));
    setText(p.version, w.version || '');
    var turns = list(w.turns);
    setText(p.busy, intake && !turns.length ? '—' : turns.length + ' / ' + (w.slots || 0));
    rel(p.beatRel, ms(w.beat), 'ago');
    p.list.replaceChildren.apply(p.list, turns.map(processTurn));
    if (!turns.length) p.list.append(el('li', 'muted', 'idle'));
  }

  function renderProcesses() {
    var ps = state.processes;
    $('processes').hidden = !ps;
    if (!ps) return;
    var all = list(ps.list);
    sync($('processes-body'), all, function (w) { return w.name; }, makeProcess, updateProcess);
    showEmpty('processes-empty', all.length === 0);
    var err = $('processes-error');
    err.hidden = !ps.error;
    setText(err, ps.error ? ps.error + (ms(ps.read) ? ' (read ' + relText(ms(ps.read), 'ago') + ')' : '') : '');
    var busy = all.reduce(function (n, w) { return n + list(w.turns).length; }, 0);
    setText($('processes-count'), all.length ? '(' + all.length + ', ' + busy + ' running)' : '');
  }

  // ---- queue ----

  function renderQueue() {
    var lanes = state.queue.filter(function (l) { return l.waiting > 0; });
    var total = lanes.reduce(function (n, l) { return n + l.waiting; }, 0);
    sync($('queue-list'), lanes, function (l) { return l.lane; }, function () {
      var li = el('li');
      var name = el('span');
      var n = el('span', 'muted');
      li.append(name, n);
      li._parts = { name: name, n: n };
      return li;
    }, function (li, l) {
      setText(li._parts.name, l.name ? '#' + l.name : l.lane);
      var oldest = ms(l.oldest);
      setText(li._parts.n, l.waiting + ' waiting' + (oldest ? ', oldest ' + relText(oldest, 'ago') : ''));
    });
    showEmpty('queue-empty', lanes.length === 0);
    setText($('queue-count'), total ? '(' + total + ')' : '');
  }

  // ---- costs ----

  function renderSpendTable(tbody, byLabel, prefix) {
    var rows = Object.keys(byLabel || {}).map(function (k) { return [k, byLabel[k]]; });
    rows.sort(function (a, b) { return b[1] - a[1]; });
    tbody.parentNode.hidden = rows.length === 0;
    tbody.replaceChildren.apply(tbody, rows.map(function (r) {
      var tr = el('tr');
      tr.append(el('td', null, prefix + r[0]), el('td', null, money(r[1])));
      return tr;
    }));
  }

  function renderCosts() {
    [['today', state.costs.today], ['week', state.costs.week]].forEach(function (p) {
      var s = p[1] || {};
      setText($('cost-' + p[0] + '-total'), money(s.total_usd) + (s.estimate ? ' (estimate)' : ''));
      renderSpendTable($('cost-' + p[0] + '-channel'), s.by_channel, '#');
      renderSpendTable($('cost-' + p[0] + '-kind'), s.by_kind, '');
    });
  }

  // ---- schedule ----

  function makeJob(j) {
    var tr = el('tr');
    var p = {
      job: cell(tr, 'Job'), when: cell(tr, 'When'),
      next: cell(tr, 'Next run'), last: cell(tr, 'Last run'), action: cell(tr, 'Action', 'action')
    };
    // A cell's content is one element: on a phone the cell is a row of
    // its label and its content.
    p.name = el('span');
    p.paused = el('span', 'paused warn');
    p.job.append(wrap(p.name, ' ', p.paused));
    p.nextRel = el('span');
    p.next.append(p.nextRel);
    p.lastRel = el('span');
    p.lastOutcome = el('span');
    p.last.append(wrap(p.lastRel, ' ', p.lastOutcome));
    p.run = el('button', 'run', 'Run now');
    p.run.type = 'button';
    p.run.addEventListener('click', function () {
      var cur = tr._job;
      post('schedule/' + encodeURIComponent(cur.kind) + '/' + encodeURIComponent(cur.name) + '/run',
        p.run, 'Started ' + cur.kind + ' ' + cur.name + '.');
    });
    p.action.append(p.run);
    tr._parts = p;
    return tr;
  }

  function updateJob(tr, j) {
    var p = tr._parts;
    tr._job = j;
    setText(p.name, j.kind + ' · ' + j.name);
    setText(p.paused, j.paused ? 'paused' : '');
    setText(p.when, (j.schedule || '') + (j.channel_name ? ' → #' + j.channel_name : ''));
    rel(p.nextRel, j.paused ? 0 : ms(j.next_run), 'until');
    rel(p.lastRel, ms(j.last_run), 'ago');
    setText(p.lastOutcome, j.last_outcome || '');
    p.lastOutcome.className = j.last_outcome ? outcomeClass(j.last_outcome) : '';
    p.run.setAttribute('aria-label', 'Run ' + j.kind + ' ' + j.name + ' now');
  }

  function renderSchedule() {
    sync($('schedule-body'), state.schedule, function (j) { return j.kind + '/' + j.name; }, makeJob, updateJob);
    showEmpty('schedule-empty', state.schedule.length === 0);
  }

  // ---- sessions ----

  function makeSession() {
    var tr = el('tr');
    var p = {
      channel: cell(tr, 'Channel'), id: cell(tr, 'Session'),
      age: cell(tr, 'Age'), model: cell(tr, 'Model'), action: cell(tr, 'Action', 'action')
    };
    p.ageRel = el('span');
    p.age.append(p.ageRel);
    p.reset = el('button', 'reset', 'Reset');
    p.reset.type = 'button';
    p.reset.addEventListener('click', function () {
      var cur = tr._session;
      if (!window.confirm('Reset the session in ' + channel(cur) + '? Its next message starts a new conversation.')) return;
      post('sessions/' + encodeURIComponent(cur.channel_id) + '/reset', p.reset, 'Session reset in ' + channel(cur) + '.');
    });
    p.action.append(p.reset);
    tr._parts = p;
    return tr;
  }

  function updateSession(tr, s) {
    var p = tr._parts;
    tr._session = s;
    setText(p.channel, channel(s));
    setText(p.id, s.session_id || '');
    rel(p.ageRel, ms(s.started), 'elapsed');
    setText(p.model, s.model || '');
    p.reset.setAttribute('aria-label', 'Reset the session in ' + channel(s));
  }

  function renderSessions() {
    sync($('sessions-body'), state.sessions, function (s) { return s.channel_id; }, makeSession, updateSession);
    showEmpty('sessions-empty', state.sessions.length === 0);
  }

  // ---- activity ----

  var KEEP = 200;

  function activityRow(e) {
    var tr = el('tr');
    var fin = ms(e.time);
    cell(tr, 'Finished').textContent = clock(fin);
    cell(tr, 'Channel').textContent = channel(e);
    cell(tr, 'Event').textContent = eventName(e);
    var out = el('span', outcomeClass(e.outcome), e.outcome || '?');
    cell(tr, 'Outcome').append(out);
    cell(tr, 'Took', 'num').textContent = span((e.duration_ns || 0) / 1e6);
    cell(tr, 'Cost', 'num').textContent = money(e.cost_usd);
    tr.setAttribute('data-key', String(e.event_id));
    return tr;
  }

  function renderActivity() {
    var body = $('activity-body');
    body.replaceChildren.apply(body, state.activity.slice(0, KEEP).map(activityRow));
    showEmpty('activity-empty', state.activity.length === 0);
  }

  function addActivity(e) {
    if (state.activity.some(function (a) { return a.event_id === e.event_id; })) return;
    state.activity.unshift(e);
    state.activity.length = Math.min(state.activity.length, KEEP);
    var body = $('activity-body');
    body.insertBefore(activityRow(e), body.firstChild);
    while (body.children.length > KEEP) body.lastChild.remove();
    showEmpty('activity-empty', false);
  }

  // ---- health ----

  function badge(id, text, cls) {
    var b = $(id);
    setText(b, text);
    b.className = 'badge ' + cls;
  }

  function renderHealth() {
    var h = state.health || {};
    badge('badge-discord', h.discord ? 'Discord connected' : 'Discord disconnected', h.discord ? 'ok' : 'bad');
    var cli = (h.cli || 'CLI') + (h.cli_version ? ' ' + h.cli_version : '');
    badge('badge-cli', cli, h.cli_version ? 'ok' : 'muted');
    badge('badge-ready', h.ready ? 'ready' : 'not ready' + (h.reason ? ': ' + h.reason : ''), h.ready ? 'ok' : 'bad');
    var lim = $('badge-limit');
    lim.hidden = !h.limit;
    if (h.limit) {
      var at = new Date(h.limit.reset_at);
      badge('badge-limit', 'usage limit reached; resumes at ' + at.toLocaleTimeString([], {hour: '2-digit', minute: '2-digit'}) +
        ' (' + (h.limit.waiting || 0) + ' waiting)', 'bad');
    }
  }

  // ---- the stream ----

  function list(v) { return Array.isArray(v) ? v : []; }

  function renderAll() {
    renderHealth();
    renderRunning();
    renderProcesses();
    renderQueue();
    renderCosts();
    renderSchedule();
    renderSessions();
    renderActivity();
  }

  var handlers = {
    snapshot: function (s) {
      skew = ms(s.now) ? ms(s.now) - Date.now() : 0;
      state = {
        running: list(s.running), queue: list(s.queue), activity: list(s.activity),
        costs: s.costs || {}, schedule: list(s.schedule), sessions: list(s.sessions), health: s.health || {},
        processes: s.processes || null
      };
      renderAll();
    },
    turn_started: function (t) {
      var i = state.running.findIndex(function (r) { return r.event_id === t.event_id; });
      if (i >= 0) state.running[i] = t; else state.running.push(t);
      renderRunning();
    },
    tool: function (c) {
      var t = state.running.find(function (r) { return r.event_id === c.event_id; });
      if (!t) return;
      t.tool = c.tool;
      renderRunning();
    },
    turn_finished: function (e) {
      state.running = state.running.filter(function (r) { return r.event_id !== e.event_id; });
      renderRunning();
      addActivity(e);
    },
    queue: function (q) { state.queue = list(q); renderQueue(); },
    schedule: function (j) { state.schedule = list(j); renderSchedule(); },
    sessions: function (s) { state.sessions = list(s); renderSessions(); },
    costs: function (c) { state.costs = c || {}; renderCosts(); },
    health: function (h) { state.health = h || {}; renderHealth(); },
    processes: function (p) { state.processes = p || null; renderProcesses(); renderRunning(); }
  };

  function connect() {
    var es = new EventSource(base + 'events');
    es.addEventListener('open', function () { badge('badge-stream', 'live', 'ok'); });
    es.addEventListener('error', function () {
      if (es.readyState === EventSource.CLOSED) {
        // Refused (signed out, or the gateway is gone): the browser will
        // not retry by itself.
        badge('badge-stream', 'offline, retrying', 'bad');
        setTimeout(connect, 10000);
      } else {
        badge('badge-stream', 'reconnecting…', 'warn');
      }
    });
    Object.keys(handlers).forEach(function (name) {
      es.addEventListener(name, function (ev) {
        // Updates before the first snapshot have nothing to apply to.
        if (name !== 'snapshot' && !state) return;
        handlers[name](JSON.parse(ev.data));
      });
    });
  }

  connect();
  setInterval(tick, 1000);
})();
