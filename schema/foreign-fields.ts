/**
 * Fields other tools use (Puppet's ensure, notify and require; Ansible's and Salt's state, dest,
 * src and user) that mesh spells another way, by resource type ('*': every type): what to do
 * instead. `validate` adds it to the message that names the unknown field. No zod here: the
 * declaration's quick path (declaration-fast.ts) must not load it.
 */
const ORDER = "mesh has no ordering fields: it puts first what a resource names (a file's folder and owner, a service's unit file and restartOn files) and otherwise keeps the order declared, so declare this one after what it needs";
const WATCH = "mesh has no notify: the resource that reacts names what it watches (a service's restartOn: [/etc/app.conf] restarts it, a command's onChange: [file:/etc/app.conf] runs it)";
const PRESENCE = 'write ensure: present or ensure: absent';
const CHECK = "write check: [program, args..., '%'] (an argv; % is the new content's path, checked before it takes the file's place)";
const HOME = 'mesh never makes or deletes a home behind your back: declare it as a type: directory owned by the user';
const AUTHORIZED_KEYS = "mesh declares whole files: write the user's ~/.ssh/authorized_keys as a type: file (owner: the user, mode: \"0600\"), every key a line, and ~/.ssh as a type: directory (mode: \"0700\")";

export const FOREIGN_FIELDS: Readonly<Record<string, Readonly<Record<string, string>>>> = {
  '*': { notify: WATCH, subscribe: WATCH, watch: WATCH, listen: WATCH, require: ORDER, before: ORDER, after: ORDER, requires: ORDER, depends_on: ORDER },
  file: {
    state: `${PRESENCE} (a folder is type: directory, a link type: symlink)`,
    dest: 'write path: (where the file goes)',
    src: 'write source: (a file in the folder of this declaration)',
    user: 'write owner:',
    validate_cmd: CHECK,
    validate: CHECK,
    check_cmd: CHECK,
  },
  directory: {
    state: PRESENCE,
    dest: 'write path:',
    user: 'write owner:',
    recurse: 'mesh manages the folder itself; declare what it holds as resources of their own',
    content: 'a directory holds no content: declare each file in it as a type: file resource',
    source: 'a directory holds no content: declare each file in it as a type: file resource',
  },
  symlink: { state: PRESENCE, src: 'write target: (what the link points at)', dest: 'write path: (the link itself)' },
  package: { state: `${PRESENCE}, and pin a version with version: "1.2-1" (there is no latest: a package is installed once and upgraded when version changes)`, pkg: 'write name:' },
  service: {
    state: 'write running: true (started) or running: false (stopped), and enabled: true or false for at boot',
    ensure: 'write running: true or running: false, and enabled: true or false for at boot',
    enable: 'write enabled: true or enabled: false',
    restart: 'write reloadOn: [/etc/app.conf] to reload it (systemctl reload) when that file changes, or restartOn: to restart it',
    hasrestart: 'mesh restarts a service through systemd (restartOn:) or reloads it (reloadOn:)',
  },
  user: {
    state: PRESENCE,
    gecos: 'write comment:',
    managehome: HOME,
    create_home: HOME,
  },
  group: { state: PRESENCE },
  command: {
    command: 'write run:',
    cmd: 'write run:',
    chdir: 'write cwd:',
    become_user: 'write user:',
    env: 'write environment: { NAME: value }',
    path: "write environment: { PATH: /usr/sbin:/usr/bin:/sbin:/bin }, or give run the program's full path",
    refreshonly: 'write onChange: [type:id, ...]: the command then runs only when one of those changed in the pass',
    try_sleep: 'write trySleep: (a duration such as 5s)',
    retries: 'write tries: (how many times run is tried)',
    delay: 'write trySleep: (a duration such as 5s, between tries)',
  },
};

/** Resource types of other tools (Puppet's exec, Ansible's copy and template modules, …) by what mesh declares instead. */
export const FOREIGN_TYPES: Readonly<Record<string, string>> = {
  exec: 'write type: command (run:, with onChange:, creates:, unless: or onlyif: as its guard)',
  shell: 'write type: command with run: as one string and shell: true',
  script: 'write type: command',
  copy: 'write type: file (content: or source:)',
  template: 'write type: file with template: true (content: or source: rendered as Liquid)',
  lineinfile: 'mesh declares whole files: write type: file with the whole content',
  dir: 'write type: directory',
  folder: 'write type: directory',
  link: 'write type: symlink (target: is what it points at)',
  pkg: 'write type: package',
  apt: 'write type: package',
  systemd: 'write type: service',
  cron: 'mesh has no cron type: declare a type: file in /etc/cron.d/',
  ssh_authorized_key: AUTHORIZED_KEYS,
  authorized_key: AUTHORIZED_KEYS,
  host: 'mesh declares whole files: write /etc/hosts as a type: file',
  file_line: 'mesh declares whole files: write type: file with the whole content',
  mount: 'mesh has no mount type: declare a systemd mount unit as a type: file in /etc/systemd/system/ and a type: service for it',
  sysctl: 'mesh has no sysctl type: declare a type: file in /etc/sysctl.d/ and a type: command with run: [sysctl, --system] and onChange: [file:/etc/sysctl.d/NAME.conf]',
  apt_repository: 'write the source as a type: file in /etc/apt/sources.list.d/ (every package comes after it)',
  apt_key: 'write the key as a type: file in /etc/apt/keyrings/ and name it in the source with signed-by=',
  get_url: 'mesh fetches nothing from the network: publish it as a package to the fleet\'s repository (mesh-cli packages add), or as a file in the fleet (type: file with source:)',
};

/** Puppet's values of ensure (and Ansible's of state) by mesh's. */
export const FOREIGN_ENSURE: Readonly<Record<string, string>> = {
  installed: 'write ensure: present',
  latest: 'write ensure: present, and pin the version with version: "1.2-1" (there is no latest)',
  purged: 'write ensure: absent, and purge: true to remove its configuration files too',
  removed: 'write ensure: absent',
  file: 'write ensure: present (a file is type: file)',
  directory: 'a folder is type: directory, with ensure: present',
  link: 'a link is type: symlink, with ensure: present',
  running: 'a service has no ensure: write running: true',
  stopped: 'a service has no ensure: write running: false',
};
