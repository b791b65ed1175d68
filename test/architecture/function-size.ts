/**
 * Function lengths and positional parameter counts, read from the TypeScript AST (not a regex):
 * every function declaration, function expression, arrow function, method, accessor and
 * constructor in a file, nested ones included, each measured on its own.
 *
 * Run it as a script to see the figures: `bun test/architecture/function-size.ts [limit]`.
 */
import { readdirSync, readFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import ts from 'typescript'

export interface FunctionSize {
  /** The file, relative to the root it was read from. */
  file: string
  /** The function's name, or `<anonymous>` qualified by where it stands (`createX/<arrow>`). */
  name: string
  /** The 1-based line it starts on. */
  line: number
  /** Lines from its first to its last, both counted. */
  lines: number
  /** Parameters taken by position (a destructured object is one; `this` is none). */
  parameters: number
}

/** Every .ts file under the given folders of root (declaration files and tests excluded). */
export function sourceFiles(root: string, folders: string[]): string[] {
  const files: string[] = []
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name)
      if (entry.isDirectory()) walk(path)
      else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) files.push(path)
    }
  }
  for (const folder of folders) walk(join(root, folder))
  return files.sort()
}

/** The sizes of every function in one file's text. */
export function measureFunctions(file: string, text: string): FunctionSize[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true)
  const found: FunctionSize[] = []
  const visit = (node: ts.Node, scope: string) => {
    let inner = scope
    if (ts.isFunctionLike(node) && 'body' in node && node.body !== undefined) {
      const name = nameOf(node, scope)
      const start = source.getLineAndCharacterOfPosition(node.getStart(source)).line
      const end = source.getLineAndCharacterOfPosition(node.getEnd()).line
      const parameters = node.parameters.filter(
        (parameter) => !(ts.isIdentifier(parameter.name) && parameter.name.text === 'this'),
      ).length
      found.push({ file, name, line: start + 1, lines: end - start + 1, parameters })
      inner = name
    }
    ts.forEachChild(node, (child) => visit(child, inner))
  }
  visit(source, '')
  return found
}

/** A readable name: its own, the variable or property it is assigned to, or where it stands. */
function nameOf(node: ts.SignatureDeclaration, scope: string): string {
  const prefix = scope ? `${scope}/` : ''
  if (node.name && (ts.isIdentifier(node.name) || ts.isStringLiteral(node.name)))
    return prefix + node.name.text
  if (ts.isConstructorDeclaration(node)) return `${prefix}constructor`
  const parent = node.parent
  if (ts.isVariableDeclaration(parent) && ts.isIdentifier(parent.name))
    return prefix + parent.name.text
  if (ts.isPropertyAssignment(parent) && ts.isIdentifier(parent.name))
    return prefix + parent.name.text
  return `${prefix}<${ts.isArrowFunction(node) ? 'arrow' : 'function'}>`
}

/** Every function in the folders' files, with paths relative to root. */
export function measureTree(root: string, folders: string[]): FunctionSize[] {
  return sourceFiles(root, folders).flatMap((path) =>
    measureFunctions(relative(root, path), readFileSync(path, 'utf8')),
  )
}

if (import.meta.main) {
  const limit = Number(process.argv[2] ?? 150)
  const root = join(import.meta.dir, '../..')
  const sizes = measureTree(root, ['src', 'providers'])
  const over = sizes.filter((size) => size.lines > limit || size.parameters > 4)
  over.sort((a, b) => b.lines - a.lines)
  for (const size of over)
    console.log(
      `${String(size.lines).padStart(4)} lines ${size.parameters} params  ${size.file}:${size.line} ${size.name}`,
    )
  console.log(`${over.length} functions over ${limit} lines or 4 positional parameters`)
}
