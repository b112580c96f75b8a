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
    'ui.language': 'Language',
    'ui.sessions': 'Sessions',
    'ui.noSessions': 'No sessions yet.',
    'ui.live': 'live',
    'ui.pick': 'Choose a session on the left.',
    'ui.loadEarlier': 'Load earlier messages',
    'ui.notFound': 'This session does not exist yet; it will appear here when it starts.',
    'ui.loadFailed': 'Could not load this session: {message}',
    'ui.connected': 'Live',
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
    'ui.language': '语言',
    'ui.sessions': '会话',
    'ui.noSessions': '还没有会话。',
    'ui.live': '进行中',
    'ui.pick': '请在左侧选择一个会话。',
    'ui.loadEarlier': '加载更早的消息',
    'ui.notFound': '该会话尚不存在；开始后会显示在这里。',
    'ui.loadFailed': '无法加载该会话：{message}',
    'ui.connected': '实时',
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
