# The role roots and the OCI images, from one definition.
#
# `roots.<role>`: the directory holding a role's root filesystem, which
# the NixOS module hands to the role's unit as RootDirectory= (the
# placeholder @root:<role>@) and to brokerd's as the home of @bin:brokerd@,
# as bxctl install does with the unpacked image. `images.<role>`: the same
# root as a dockerTools.streamLayeredImage (`stream`) and `idFile`, a
# derivation whose output holds its ID (the config digest, sha256:<64
# hex>), for every entry of modules/deployment.json's `images`; the module
# loads only the tool image (into brokerd's rootless Podman). The ID is
# never read here: reading a built output while evaluating would be
# import-from-derivation (the owner's system would build images to
# evaluate, and could not be evaluated on another architecture); the
# units read idFile when they run.
#
# Invariant: a role root holds what images/role-image puts in the role's
# image and nothing else: /bin/<binary> (static), /etc/passwd and
# /etc/group with root, the role's user (deployment.json's `users`) and
# nobody, the CA bundle only where deployment.json's image says `tls`, an
# empty /etc/resolv.conf and /etc/hosts only where the role's unit binds
# them (its network), and the empty mount points every unit needs. Nothing
# is restated: ids, names, TLS and mounts all come from deployment.json.
{ pkgs, lib ? pkgs.lib, package ? (import ../nix { inherit pkgs; }).package }:

let
  deployment = builtins.fromJSON (builtins.readFile ../modules/deployment.json);
  userOf = role: lib.findFirst (u: u.role == role) null deployment.users;
  unitOf = role: lib.findFirst (u: u.role == role) null deployment.units;

  # The unit's own file binds (-/etc/resolv.conf, -/etc/hosts for a role
  # with a network) need a file to mount over inside a read-only root.
  fileBinds = role: let u = unitOf role; in
    if u == null then [ ] else
      map (lib.removePrefix "-")
        (lib.filter (p: lib.hasPrefix "-/etc/" p || lib.hasPrefix "/etc/" p)
          ((u.sections.Service.BindReadOnlyPaths or [ ]) ++ (u.sections.Service.BindPaths or [ ])));

  root = img: let u = userOf img.role; in pkgs.runCommand "${img.name}-root" { } ''
    mkdir -p $out/bin $out/etc $out/proc $out/dev $out/sys $out/run $out/tmp $out/var/tmp $out${deployment.stateDir}
    cp -L ${package}/bin/${img.binary} $out/bin/${img.binary}
    cat > $out/etc/passwd <<PASSWD
    root:x:0:0:root:/nonexistent:/bin/false
    ${u.name}:x:${toString u.uid}:${toString u.gid}:boxmaker ${u.role}:/nonexistent:/bin/false
    nobody:x:65534:65534:nobody:/nonexistent:/bin/false
    PASSWD
    cat > $out/etc/group <<GROUP
    root:x:0:
    ${u.name}:x:${toString u.gid}:
    nogroup:x:65534:
    GROUP
    ${lib.optionalString img.tls ''
      mkdir -p $out/etc/ssl/certs
      cp ${pkgs.cacert}/etc/ssl/certs/ca-bundle.crt $out/etc/ssl/certs/ca-certificates.crt
    ''}
    ${lib.concatMapStrings (f: "touch $out${f}\n") (fileBinds img.role)}
  '';

  # The ID file: the sha256 of the config blob the stream names in
  # manifest.json, as a derivation (never read at evaluation).
  idOf = stream: pkgs.runCommand "${stream.name}-id" { nativeBuildInputs = [ pkgs.jq pkgs.gnutar ]; } ''
    ${stream} > image.tar
    config=$(tar -xOf image.tar manifest.json | jq -r '.[0].Config')
    echo "sha256:$(tar -xOf image.tar "$config" | sha256sum | cut -d' ' -f1)" > $out
  '';

  roleImage = img: let
    u = userOf img.role;
    stream = pkgs.dockerTools.streamLayeredImage {
      inherit (img) name;
      contents = [ roots.${img.role} ];
      # The store makes every directory 0555; the image's /tmp is 1777 as
      # images/role-image makes it (a unit mounts its own over it).
      fakeRootCommands = "chmod 1777 tmp var/tmp";
      config = {
        User = "${toString u.uid}:${toString u.gid}";
        Entrypoint = [ "/bin/${img.binary}" ];
        Env = [ "PATH=/bin" ];
        WorkingDir = "/";
      };
    };
  in { inherit stream; idFile = idOf stream; };

  # docs/tool-image.md: toolkit, static busybox with its applet links, the
  # CA bundle, root and nobody, empty /tmp /run /work; no Entrypoint, Cmd
  # or User (the runner sets them), PATH=/bin only.
  cacert = pkgs.runCommand "boxmaker-cacert" { } ''
    mkdir -p $out/etc/ssl/certs
    cp ${pkgs.cacert}/etc/ssl/certs/ca-bundle.crt $out/etc/ssl/certs/ca-certificates.crt
  '';
  toolEtc = pkgs.runCommand "boxmaker-tool-etc" { } ''
    mkdir -p $out/etc
    printf 'root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n' > $out/etc/passwd
    printf 'root:x:0:\nnogroup:x:65534:\n' > $out/etc/group
  '';
  # The tool binary alone: the image's closure holds no other role's.
  toolBin = name: pkgs.runCommand "boxmaker-${name}" { } ''
    mkdir -p $out/bin
    cp -L ${package}/bin/${name} $out/bin/${name}
  '';
  toolImage = img: let
    stream = pkgs.dockerTools.streamLayeredImage {
      inherit (img) name;
      contents = [ (toolBin img.binary) pkgs.pkgsStatic.busybox toolEtc ] ++ lib.optional img.tls cacert;
      extraCommands = ''
        mkdir -p tmp run work usr/bin
        chmod 1777 tmp
        ln -s /bin/busybox usr/bin/env
      '';
      config.Env = [ "PATH=/bin" ];
    };
  in { inherit stream; idFile = idOf stream; };

  # A role image is an image of a role with a user; the tool image has none.
  roleImages = lib.filter (img: userOf img.role != null) deployment.images;
  roots = lib.listToAttrs (map (img: lib.nameValuePair img.role (root img)) roleImages);
in
{
  inherit roots;
  images = lib.listToAttrs (map (img: lib.nameValuePair img.role (if userOf img.role == null then toolImage img else roleImage img)) deployment.images);
}
