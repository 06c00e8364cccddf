//! The script command line: `EVALSHA sha 1 key op args...` (or `EVAL body ...`).

use ::redis::Cmd;

/// `name script 1 key op args...`: one key, so a cluster routes it by that key.
pub(crate) fn command(name: &str, script: &str, key: &str, op: &str, args: &[i64]) -> Cmd {
    let mut cmd = ::redis::cmd(name);
    cmd.arg(script).arg(1).arg(key).arg(op);
    for a in args {
        cmd.arg(*a);
    }
    cmd
}
