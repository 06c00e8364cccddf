//! The script command line: `EVALSHA sha 1 key op args...` (or `EVAL body ...`).

use ::redis::Cmd;

/// `name script 1 key op args...`: one key, so a cluster routes it by that key.
pub(crate) fn command(name: &str, script: &str, key: &str, op: &str, args: &[i64]) -> Cmd {
    command_keys(name, script, &[key], op, args)
}

/// `name script k key_1 .. key_k op args...` (a grouped call: one server only).
pub(crate) fn command_keys(name: &str, script: &str, keys: &[&str], op: &str, args: &[i64]) -> Cmd {
    let mut cmd = ::redis::cmd(name);
    cmd.arg(script).arg(keys.len());
    for k in keys {
        cmd.arg(*k);
    }
    cmd.arg(op);
    for a in args {
        cmd.arg(*a);
    }
    cmd
}
