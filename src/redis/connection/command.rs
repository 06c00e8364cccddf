//! The script command line: `EVALSHA sha 1 key op args...` (or `EVAL body ...`).

use ::redis::Cmd;

/// `name script 1 key op args...`: one key, so a cluster routes it by that key.
pub(crate) fn command(name: &str, script: &str, key: &str, op: &str, args: &[i64]) -> Cmd {
    command_keys(name, script, &[key], op, args)
}

/// The most bytes an `i64` takes in decimal (`i64::MIN`, sign included).
const I64_DIGITS: usize = 20;

/// `name script k key_1 .. key_k op args...` (a grouped call: one server only).
pub(crate) fn command_keys(name: &str, script: &str, keys: &[&str], op: &str, args: &[i64]) -> Cmd {
    command_keys_in(None, name, script, keys, op, args)
}

/// [`command_keys`] in `spare`'s buffers if given (an empty command, kept from an earlier
/// call: no allocation when they are large enough), else in new ones of the command's size.
pub(crate) fn command_keys_in(
    spare: Option<Cmd>,
    name: &str,
    script: &str,
    keys: &[&str],
    op: &str,
    args: &[i64],
) -> Cmd {
    let mut cmd = spare.unwrap_or_else(|| {
        // Room for every argument from the start: grown one push at a time, the buffers were
        // reallocated several times per call.
        let count = 4 + keys.len() + args.len();
        let bytes = name.len()
            + script.len()
            + keys.iter().map(|k| k.len()).sum::<usize>()
            + op.len()
            + I64_DIGITS * (1 + args.len());
        Cmd::with_capacity(count, bytes)
    });
    cmd.arg(name).arg(script).arg(keys.len());
    for k in keys {
        cmd.arg(*k);
    }
    cmd.arg(op);
    for a in args {
        cmd.arg(*a);
    }
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_pack_as_before() {
        let c = command_keys(
            "EVALSHA",
            "abc",
            &["{k}1", "{k}2"],
            "group",
            &[-5, i64::MIN, 0],
        );
        let mut expected = ::redis::cmd("EVALSHA");
        expected
            .arg("abc")
            .arg(2usize)
            .arg("{k}1")
            .arg("{k}2")
            .arg("group");
        expected.arg(-5i64).arg(i64::MIN).arg(0i64);
        assert_eq!(c.get_packed_command(), expected.get_packed_command());
        // In a cleared command's buffers: the same bytes.
        let mut spare = command("EVALSHA", "x", "{a-longer-key}", "peek", &[7; 4]);
        spare.clear();
        let again = command_keys_in(
            Some(spare),
            "EVALSHA",
            "abc",
            &["{k}1", "{k}2"],
            "group",
            &[-5, i64::MIN, 0],
        );
        assert_eq!(again.get_packed_command(), expected.get_packed_command());
        let one = command("EVAL", "body", "{u}", "check", &[1, 2, 3]);
        assert_eq!(
            one.get_packed_command(),
            b"*8\r\n$4\r\nEVAL\r\n$4\r\nbody\r\n$1\r\n1\r\n$3\r\n{u}\r\n$5\r\ncheck\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n"
        );
    }
}
