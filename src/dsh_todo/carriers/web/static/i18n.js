// Labels in English and Chinese (SPEC §9). The locale follows the browser's language preferences unless the reader
// picked one with the switch, which is remembered.

export const MESSAGES = {
  en: {
    'todo.title': 'To-dos',
    'todo.progress.done': '{done} completed',
    'todo.progress.active': '{active} in progress',
    'todo.progress.pending': '{pending} pending',
    'todo.rowTitle': 'Update to-do list',
    'todo.completed': '{done}/{total} completed',
    'tool.running': 'Running',
    'tool.failed': 'Failed',
    'tool.stopped': 'Stopped',
    'tool.in': 'IN',
    'tool.out': 'OUT',
    'tool.inspect': 'Inspect',
    'diff.status': '{from} → {to}',
    'diff.added': '(added)',
    'diff.removed': '(removed)',
    'needs.me': 'Needs me',
    'needs.stopped': 'stopped with {count} open',
    'needs.waiting': 'waiting on you',
    'needs.idle': 'idle {minutes} min with an item in progress',
    'board.children': 'Subagents ({count})',
    'board.childrenOpen': '{open} open in subagents',
    'ui.language': 'Language',
    'ui.sessions': 'Sessions',
    'ui.noSessions': 'No sessions yet.',
    'ui.board': 'Board',
    'state.live': 'live',
    'state.ended': 'ended',
    'state.interrupted': 'interrupted',
    'state.aborted': 'aborted',
    'state.error': 'error',
    'state.refused': 'refused',
    'state.idle': 'idle',
    'board.search': 'Search tasks',
    'board.state': 'State',
    'board.project': 'Project',
    'board.allStates': 'All states',
    'board.allProjects': 'All projects',
    'board.count': '{shown} of {total}',
    'board.more': 'Show more ({count})',
    'board.none': 'No session matches.',
    'board.noPlan': 'No standing plan',
    'board.allDone': 'Every task completed',
    'board.noneActive': 'Nothing in progress',
    'board.moreActive': '+{count} more in progress',
    'turn.end.completed': 'Turn {turn} completed',
    'turn.end.interrupted': 'Turn {turn} interrupted',
    'turn.end.aborted': 'Turn {turn} aborted',
    'turn.end.error': 'Turn {turn} failed',
    'turn.end.other': 'Turn {turn} ended: {kind}',
    'ui.loadEarlier': 'Load earlier messages',
    'ui.notFound': 'This session does not exist yet; it will appear here when it starts.',
    'ui.loadFailed': 'Could not load this session: {message}',
    'ui.connected': 'Connected',
    'ui.connecting': 'Connecting…',
    'ui.you': 'You',
    'ui.assistant': 'Assistant',
  },
  zh: {
    'todo.title': '任务',
    'todo.progress.done': '{done} 已完成',
    'todo.progress.active': '{active} 进行中',
    'todo.progress.pending': '{pending} 待处理',
    'todo.rowTitle': '更新任务清单',
    'todo.completed': '{done}/{total} 已完成',
    'tool.running': '运行中',
    'tool.failed': '失败',
    'tool.stopped': '已停止',
    'tool.in': '输入',
    'tool.out': '输出',
    'tool.inspect': '查看原始数据',
    'diff.status': '{from} → {to}',
    'diff.added': '（新增）',
    'diff.removed': '（移除）',
    'needs.me': '需要我',
    'needs.stopped': '已停止，{count} 项未完成',
    'needs.waiting': '等你处理',
    'needs.idle': '空闲 {minutes} 分钟，仍有进行中的任务',
    'board.children': '子代理（{count}）',
    'board.childrenOpen': '子代理中 {open} 项未完成',
    'ui.language': '语言',
    'ui.sessions': '会话',
    'ui.noSessions': '还没有会话。',
    'ui.board': '看板',
    'state.live': '运行中',
    'state.ended': '已结束',
    'state.interrupted': '已中断',
    'state.aborted': '已中止',
    'state.error': '出错',
    'state.refused': '已拒绝',
    'state.idle': '未开始',
    'board.search': '搜索任务',
    'board.state': '状态',
    'board.project': '项目',
    'board.allStates': '全部状态',
    'board.allProjects': '全部项目',
    'board.count': '{shown} / {total}',
    'board.more': '显示更多（{count}）',
    'board.none': '没有匹配的会话。',
    'board.noPlan': '没有当前计划',
    'board.allDone': '全部任务已完成',
    'board.noneActive': '暂无进行中的任务',
    'board.moreActive': '另有 {count} 项进行中',
    'turn.end.completed': '第 {turn} 轮已完成',
    'turn.end.interrupted': '第 {turn} 轮已中断',
    'turn.end.aborted': '第 {turn} 轮已中止',
    'turn.end.error': '第 {turn} 轮出错',
    'turn.end.other': '第 {turn} 轮结束：{kind}',
    'ui.loadEarlier': '加载更早的消息',
    'ui.notFound': '该会话尚不存在；开始后会显示在这里。',
    'ui.loadFailed': '无法加载该会话：{message}',
    'ui.connected': '已连接',
    'ui.connecting': '连接中…',
    'ui.you': '你',
    'ui.assistant': '助手',
  },
};

const STORAGE_KEY = 'dsh-todo.locale';
let current = 'en';

export function detectLocale() {
  try {
    const saved = window.localStorage.getItem(STORAGE_KEY);
    if (saved && Object.hasOwn(MESSAGES, saved)) return saved;
  } catch {
    // storage may be disabled; fall back to the browser's languages
  }
  const languages = navigator.languages && navigator.languages.length ? navigator.languages : [navigator.language];
  for (const language of languages) {
    const tag = String(language || '').toLowerCase();
    if (tag === 'zh' || tag.startsWith('zh-')) return 'zh';
    if (tag === 'en' || tag.startsWith('en-')) return 'en';
  }
  return 'en';
}

export function locale() {
  return current;
}

export function setLocale(next, { remember = false } = {}) {
  current = Object.hasOwn(MESSAGES, next) ? next : 'en';
  document.documentElement.lang = current === 'zh' ? 'zh-CN' : 'en';
  if (remember) {
    try {
      window.localStorage.setItem(STORAGE_KEY, current);
    } catch {
      // not remembered; the choice still applies to this page
    }
  }
}

// `{name}` placeholders are filled from `vars`; a value is inserted as a plain string, never re-interpreted.
export function t(key, vars) {
  const table = MESSAGES[current];
  const template = Object.hasOwn(table, key) ? table[key] : (Object.hasOwn(MESSAGES.en, key) ? MESSAGES.en[key] : key);
  return template.replace(/\{(\w+)\}/g, (whole, name) => (vars && Object.hasOwn(vars, name) ? String(vars[name]) : whole));
}
